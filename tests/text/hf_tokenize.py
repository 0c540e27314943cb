#!/usr/bin/env python3
"""The oracle of tests/test_text.cpp: Hugging Face `tokenizers` on the same inputs.

usage: hf_tokenize.py TOKENIZER_JSON LINES OUT [--pairs] [--no-special]
       hf_tokenize.py --find NAME OUTDIR  (writes a packaged model's tokenizer.json there, as
                                          OUTDIR/NAME.tokenizer.json)

Reads LINES (UTF-8, one input per line, split on "\\n" only; invalid bytes read as U+FFFD, as
errors="replace" does), encodes each with the file's truncation and padding off (as HF's
no_truncation() / no_padding()), and writes one line per input to OUT:
ids|type_ids|attention_mask|special_tokens_mask|start:end,...|decode|decode(skip_special)
with the two decodes JSON-quoted. --pairs: each line is first<TAB>second. --no-special: encode
with add_special_tokens=False.
"""
import json
import os
import sys
import zipfile


def find(name, outdir):
    if name == "all-minilm-l6-v2":
        import all_minilm_l6_v2
        z = os.path.join(os.path.dirname(all_minilm_l6_v2.__file__), "model.zip")
        with zipfile.ZipFile(z) as f:
            data = f.read("tokenizer.json")
    else:
        raise SystemExit(f"unknown model {name}")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, name + ".tokenizer.json")
    with open(path, "wb") as f:
        f.write(data)


def main():
    if sys.argv[1] == "--find":
        return find(sys.argv[2], sys.argv[3])
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(sys.argv[1])
    tok.no_truncation()
    tok.no_padding()
    with open(sys.argv[2], "rb") as f:
        raw = f.read()
    lines = raw.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    pairs = "--pairs" in sys.argv
    if pairs:
        inputs = [tuple(l.split("\t", 1)) if "\t" in l else (l, "") for l in lines]
    else:
        inputs = lines
    encs = tok.encode_batch(inputs, add_special_tokens="--no-special" not in sys.argv)
    with open(sys.argv[3], "w", encoding="utf-8") as out:
        for e in encs:
            fields = [
                " ".join(map(str, e.ids)),
                " ".join(map(str, e.type_ids)),
                " ".join(map(str, e.attention_mask)),
                " ".join(map(str, e.special_tokens_mask)),
                " ".join(f"{a}:{b}" for a, b in e.offsets),
                json.dumps(tok.decode(e.ids, skip_special_tokens=False)),
                json.dumps(tok.decode(e.ids, skip_special_tokens=True)),
            ]
            out.write("|".join(fields) + "\n")


if __name__ == "__main__":
    main()
