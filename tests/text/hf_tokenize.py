#!/usr/bin/env python3
"""The oracle of tests/test_text.cpp: Hugging Face `tokenizers` on the same inputs.

usage: hf_tokenize.py TOKENIZER_JSON LINES OUT [--pairs] [--no-special]
       hf_tokenize.py --extract NAME OUTDIR  (the packaged checkpoint: config.json,
                                          model.safetensors, tokenizer.json)
       hf_tokenize.py --find NAME OUTDIR  (writes a packaged model's tokenizer.json there, as
                                          OUTDIR/NAME.tokenizer.json)

       hf_tokenize.py --batch TOKENIZER_JSON LINES OUT CONFIG_JSON [--pairs]
       hf_tokenize.py --stream TOKENIZER_JSON LINES OUT

Reads LINES (UTF-8, one input per line, split on "\\n" only; invalid bytes read as U+FFFD, as
errors="replace" does), encodes each with the file's truncation and padding off (as HF's
no_truncation() / no_padding()), and writes one line per input to OUT:
ids|type_ids|attention_mask|special_tokens_mask|start:end,...|decode|decode(skip_special)
with the two decodes JSON-quoted. --pairs: each line is first<TAB>second. --no-special: encode
with add_special_tokens=False.

--batch: CONFIG_JSON is {"chunk": rows per batch, "truncation": enable_truncation's arguments or
null, "padding": enable_padding's or null}; each batch's rows are written as one JSON line each
(ids, type_ids, attention_mask, special_tokens_mask, offsets, overflowing: the same, nested), or,
where HF refuses the batch, one line "ERROR <message>" for each of its rows.
--stream: each line's ids fed to a DecodeStream one at a time; one JSON list per line of what each
step returned (null for nothing).
"""
import json
import os
import sys
import zipfile


def extract(name, outdir):
    """The packaged checkpoint's config.json, model.safetensors and tokenizer.json into OUTDIR."""
    if name != "all-minilm-l6-v2":
        raise SystemExit(f"unknown model {name}")
    import all_minilm_l6_v2
    z = os.path.join(os.path.dirname(all_minilm_l6_v2.__file__), "model.zip")
    os.makedirs(outdir, exist_ok=True)
    with zipfile.ZipFile(z) as f:
        for member in ("config.json", "model.safetensors", "tokenizer.json"):
            with open(os.path.join(outdir, member), "wb") as out:
                out.write(f.read(member))


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


def read_lines(path):
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def enc_json(e):
    return {"ids": e.ids, "type_ids": e.type_ids, "attention_mask": e.attention_mask,
            "special_tokens_mask": e.special_tokens_mask,
            "offsets": [list(o) for o in e.offsets],
            "overflowing": [enc_json(o) for o in e.overflowing]}


def batch(argv):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(argv[0])
    lines = read_lines(argv[1])
    cfg = json.loads(argv[3])
    tok.no_truncation()
    tok.no_padding()
    if cfg["truncation"]:
        tok.enable_truncation(**cfg["truncation"])
    if cfg["padding"]:
        tok.enable_padding(**cfg["padding"])
    pairs = "--pairs" in argv
    inputs = [tuple(l.split("\t", 1)) if "\t" in l else (l, "") for l in lines] if pairs else lines
    with open(argv[2], "w", encoding="utf-8") as out:
        n = cfg["chunk"]
        for k in range(0, len(inputs), n):
            chunk = inputs[k:k + n]
            try:
                rows = [json.dumps(enc_json(e), separators=(",", ":")) for e in tok.encode_batch(chunk)]
            except BaseException as ex:  # HF refuses the whole batch (a Rust panic included)
                rows = ["ERROR " + str(ex).replace("\n", " ")] * len(chunk)
            for r in rows:
                out.write(r + "\n")


def stream(argv):
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream
    tok = Tokenizer.from_file(argv[0])
    with open(argv[2], "w", encoding="utf-8") as out:
        for l in read_lines(argv[1]):
            ds = DecodeStream(skip_special_tokens=False)
            steps = [ds.step(tok, int(i)) for i in l.split()]
            out.write(json.dumps(steps, ensure_ascii=False) + "\n")


def main():
    if sys.argv[1] == "--find":
        return find(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--extract":
        return extract(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--batch":
        return batch(sys.argv[2:])
    if sys.argv[1] == "--stream":
        return stream(sys.argv[2:])
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
