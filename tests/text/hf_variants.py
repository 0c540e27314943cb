#!/usr/bin/env python3
"""Tokenizers for tests/test_text.cpp to check against HF, made with HF `tokenizers` itself.

usage: hf_variants.py CORPUS MINILM_JSON SMOLLM2_JSON OUTDIR [CHARSMAP]

Trains, on CORPUS (UTF-8 lines of real text), the kinds no small real tokenizer ships offline:
  llama2-bpe      SentencePiece-style BPE with byte fallback, as Llama-2 / Mistral lay it out
                  (Prepend + Replace normalizers, no pre-tokenizer, <0xXX> byte tokens, fused
                  unknowns, the Replace/ByteFallback/Fuse/Strip decoder chain, a <s> template);
  t5-unigram      Unigram under NFKC and a regex Replace, Metaspace pre-tokenizer and decoder,
                  "$A </s>" template;
  unigram-bytes   Unigram with byte fallback, NFD + StripAccents + Lowercase + Strip, a Sequence
                  of WhitespaceSplit and Metaspace (prepend_scheme "first", no split), a decoder
                  chain of Metaspace, ByteFallback and Fuse;
and rewrites the two real tokenizers with every other listed component in turn (pre-tokenizers
with each Split behaviour, normalizers, RobertaProcessing, ByteLevel post-processor, Sequence
post-processor, the Llama-3 layout, BPE/CTC decoders). Each file is loaded back by HF before it
is kept. With CHARSMAP (a SentencePiece precompiled character map, tests/data/nmt_nfkc.charsmap.gz
unzipped), also the Precompiled normalizer as T5's layout has it, and under WordPiece. Writes
OUTDIR/NAME.json for each and prints the names, one per line.
"""
import copy
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def template(single, pair, specials):
    return {"type": "TemplateProcessing",
            "single": single, "pair": pair,
            "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in specials}}


def seq(i, t=0):
    return {"Sequence": {"id": i, "type_id": t}}


def sp(i, t=0):
    return {"SpecialToken": {"id": i, "type_id": t}}


def with_byte_tokens(j, after):
    """The model's vocabulary with <0x00>..<0xFF> inserted after the first `after` ids."""
    m = j["model"]
    if m["type"] == "BPE":
        order = sorted(m["vocab"], key=lambda t: m["vocab"][t])
        bytes_ = [f"<0x{b:02X}>" for b in range(256)]
        order = order[:after] + bytes_ + [t for t in order[after:] if t not in bytes_]
        m["vocab"] = {t: i for i, t in enumerate(order)}
    else:
        pieces = m["vocab"]
        bytes_ = [[f"<0x{b:02X}>", 0.0] for b in range(256)]
        m["vocab"] = pieces[:after] + bytes_ + pieces[after:]
        if m.get("unk_id") is not None and m["unk_id"] >= after:
            m["unk_id"] += 256
    ids = {}
    if m["type"] == "BPE":
        ids = m["vocab"]
    else:
        ids = {p[0]: i for i, p in enumerate(m["vocab"])}
    for a in j.get("added_tokens") or []:
        a["id"] = ids[a["content"]]
    return j


def train(corpus, out):
    made = {}
    # Llama-2 layout
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    t.train([corpus], trainers.BpeTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"],
                                          limit_alphabet=120, show_progress=False))
    j = json.loads(t.to_str())
    j["pre_tokenizer"] = None
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    j["post_processor"] = template([sp("<s>"), seq("A")],
                                   [sp("<s>"), seq("A"), sp("<s>", 1), seq("B", 1)],
                                   [("<s>", 1)])
    made["llama2-bpe"] = with_byte_tokens(j, 3)
    # T5 layout
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(
        __import__("tokenizers").Regex(" {2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    t.train([corpus], trainers.UnigramTrainer(vocab_size=3000, unk_token="<unk>",
                                              special_tokens=["<pad>", "</s>", "<unk>"],
                                              show_progress=False))
    j = json.loads(t.to_str())
    j["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                    "split": True}
    j["post_processor"] = template([seq("A"), sp("</s>")],
                                   [seq("A"), sp("</s>"), seq("B", 1), sp("</s>", 1)],
                                   [("</s>", 1)])
    made["t5-unigram"] = j
    # Unigram with byte fallback
    j2 = copy.deepcopy(j)
    j2["model"]["byte_fallback"] = True
    j2["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
        {"type": "Strip", "strip_left": True, "strip_right": True}]}
    j2["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}]}
    j2["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    made["unigram-bytes"] = with_byte_tokens(j2, 3)
    return made


def variants(minilm, smol):
    made = {}
    for b in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        j = copy.deepcopy(minilm)
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\s+|[,.;:!?]"}, "behavior": b,
             "invert": False},
            {"type": "Punctuation", "behavior": b}]}
        made[f"split-{b}"] = j
    j = copy.deepcopy(minilm)
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "e"}, "behavior": "MergedWithNext",
         "invert": True},
        {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True}]}
    made["split-invert-digits"] = j
    j = copy.deepcopy(minilm)
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Whitespace"}, {"type": "Digits", "individual_digits": False}]}
    made["whitespace-digits"] = j
    for form in ["NFC", "NFD", "NFKC", "NFKD"]:
        j = copy.deepcopy(minilm)
        j["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": form}, {"type": "Lowercase"}]}
        made[f"norm-{form}"] = j
    j = copy.deepcopy(minilm)
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": False},
        {"type": "Replace", "pattern": {"Regex": r"[0-9]+"}, "content": "#"},
        {"type": "Replace", "pattern": {"String": "th"}, "content": "TH"},
        {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]}
    j["decoder"] = {"type": "CTC", "pad_token": "[PAD]", "word_delimiter_token": "|",
                    "cleanup": True}
    made["norm-mixed-ctc"] = j
    # byte-level variants on SmolLM2's vocabulary
    j = copy.deepcopy(smol)
    j["pre_tokenizer"]["add_prefix_space"] = True
    j["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|im_end|>", 2],
                           "cls": ["<|im_start|>", 1], "trim_offsets": True,
                           "add_prefix_space": True}
    made["bytelevel-roberta"] = j
    j = copy.deepcopy(smol)
    j["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                           "use_regex": True}
    made["bytelevel-trim"] = j
    j = copy.deepcopy(smol)
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]}
    j["model"]["ignore_merges"] = True
    j["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        template([sp("<|endoftext|>"), seq("A")],
                 [sp("<|endoftext|>"), seq("A"), sp("<|endoftext|>", 1), seq("B", 1)],
                 [("<|endoftext|>", 0)])]}
    made["llama3-layout"] = j
    j = copy.deepcopy(smol)
    j["decoder"] = {"type": "BPEDecoder", "suffix": "Ġ"}
    j["normalizer"] = {"type": "NFC"}
    made["nfc-bpedecoder"] = j
    return made


def precompiled(made, charsmap, minilm):
    import base64
    with open(charsmap, "rb") as f:
        b64 = base64.b64encode(f.read()).decode()
    j = copy.deepcopy(made["t5-unigram"])
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": b64},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    made["t5-precompiled"] = j
    j = copy.deepcopy(minilm)
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": b64}, {"type": "Lowercase"}]}
    made["norm-precompiled"] = j


def main():
    corpus, minilm_path, smol_path, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    with open(minilm_path, encoding="utf-8") as f:
        minilm = json.load(f)
    with open(smol_path, encoding="utf-8") as f:
        smol = json.load(f)
    made = train(corpus, out)
    made.update(variants(minilm, smol))
    if len(sys.argv) > 5:
        precompiled(made, sys.argv[5], minilm)
    for name, j in made.items():
        path = os.path.join(out, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
        Tokenizer.from_file(path)  # HF reads it
        print(name)


if __name__ == "__main__":
    main()
