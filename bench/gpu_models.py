"""PyTorch's side of bench/bench_gpu_models.cpp (issue 10): the same ResNet-50 and BERT-base
training steps (AMP float16 under torch.autocast + GradScaler; SGD momentum / AdamW; the same
shapes and hyper-parameters), eager, on the lent GPU. Writes {"resnet50_images_per_s": ...,
"bert_sequences_per_s": ...} to the file named by the first argument, which bench_gpu_models
reads with --torch and prints beside its own figures. Run by bench/gpu_check.sh.
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torchvision


def seconds_per_step(step, warm=3, n=10):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n


def amp_step(model, opt, scaler, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step


class Bert(nn.Module):
    """gpu_models.h's Bert: embeddings, 12 post-norm GELU encoder layers, masked-LM head."""

    def __init__(self, vocab=30522, max_len=512, d=768, heads=12, ff=3072, layers=12, dropout=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, ff, dropout, activation="gelu", layer_norm_eps=1e-12)
            for _ in range(layers))
        self.dense = nn.Linear(d, d)
        self.head_norm = nn.LayerNorm(d, eps=1e-12)
        self.decoder = nn.Linear(d, vocab)

    def forward(self, ids):  # ids [seq, batch]
        positions = torch.arange(ids.shape[0], device=ids.device)
        h = self.drop(self.norm(self.tok(ids) + self.pos(positions).unsqueeze(1)))
        for layer in self.encoder:
            h = layer(h)
        return self.decoder(self.head_norm(nn.functional.gelu(self.dense(h))))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "torch_models.json"
    dev = torch.device("cuda")
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    results = {}

    model = torchvision.models.resnet50().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(128, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (128,), device=dev)
    t = seconds_per_step(amp_step(model, opt, torch.amp.GradScaler("cuda"), x, y))
    results["resnet50_images_per_s"] = 128 / t
    print(f"pytorch {torch.__version__} ResNet-50 batch 128 AMP fp16: {128 / t:.1f} images/s")
    del model, opt, x, y

    model = Bert().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    ids = torch.randint(0, 30522, (128, 64), device=dev)
    labels = torch.randint(0, 30522, (128, 64), device=dev)
    t = seconds_per_step(amp_step(model, opt, torch.amp.GradScaler("cuda"), ids, labels))
    results["bert_sequences_per_s"] = 64 / t
    print(f"pytorch {torch.__version__} BERT-base seq 128 batch 64 AMP fp16: {64 / t:.1f} sequences/s")

    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
