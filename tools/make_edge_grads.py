#!/usr/bin/env python3
"""Writes tests/data/edge_grads.tsv: libtorch's values and gradients of ops and losses at the
edges of their domains (the singular, clamped and saturated points), which
tests/test_edge_grads.cpp compares the library against (NOTE [Edge gradients]).

Each case is a function of one to three input vectors; the gradient is that of the sum of the
result (a gradient of ones). Run with any PyTorch (Debian's python3-torch, or the bench venv's):
    python3 tools/make_edge_grads.py > tests/data/edge_grads.tsv
Every case's name must have a twin in tests/test_edge_grads.cpp.
"""
import math
import sys

import torch
import torch.nn.functional as F

F32, F64 = torch.float32, torch.float64

# name, dtype, inputs (lists), function of the input tensors
CASES = [
    ("log", F64, [[0.0, 0.5, 1.0, 2.0, -1.0]], lambda x: torch.log(x)),
    ("log2", F64, [[0.0, 0.5, 4.0]], lambda x: torch.log2(x)),
    ("log1p", F64, [[-1.0, -0.5, 0.0, 1.0]], lambda x: torch.log1p(x)),
    ("sqrt", F64, [[0.0, 1e-8, 4.0, -1.0]], lambda x: torch.sqrt(x)),
    ("rsqrt", F64, [[0.0, 0.25, 4.0]], lambda x: torch.rsqrt(x)),
    ("reciprocal", F64, [[0.0, 2.0, -4.0]], lambda x: torch.reciprocal(x)),
    ("exp", F64, [[-1000.0, 0.0, 1000.0]], lambda x: torch.exp(x)),
    ("pow_2", F64, [[0.0, -1.5, 2.0]], lambda x: torch.pow(x, 2)),
    ("pow_half", F64, [[0.0, 4.0]], lambda x: torch.pow(x, 0.5)),
    ("pow_0", F64, [[0.0, 2.0, -3.0]], lambda x: torch.pow(x, 0)),
    ("pow_neg1", F64, [[0.0, 2.0]], lambda x: torch.pow(x, -1)),
    ("pow_tensor", F64, [[0.0, 0.0, 2.0, 0.0], [0.0, 2.0, 0.5, 0.5]],
     lambda b, e: torch.pow(b, e)),
    ("pow_scalar_base0", F64, [[0.0, 1.0, 2.0]], lambda e: torch.pow(0.0, e)),
    ("div", F64, [[1.0, 0.0, -1.0, 3.0], [0.0, 0.0, 2.0, -0.5]], lambda a, b: a / b),
    ("atan2", F64, [[0.0, 1.0, 0.0, -1.0], [0.0, 0.0, -1.0, 2.0]],
     lambda y, x: torch.atan2(y, x)),
    ("norm2_zero", F64, [[0.0, 0.0, 0.0]], lambda x: torch.norm(x, 2)),
    ("norm1_zero", F64, [[0.0, 0.0, 0.0]], lambda x: torch.norm(x, 1)),
    ("norm2_rows", F64, [[0.0, 0.0, 3.0, 4.0]],
     lambda x: torch.norm(x.reshape(2, 2), 2, dim=1)),
    ("normalize_zero", F64, [[0.0, 0.0, 0.0, 1.0, 2.0, 2.0]],
     lambda x: F.normalize(x.reshape(2, 3), dim=1)),
    ("clamp", F64, [[-1.0, 0.0, 0.5, 1.0, 2.0]], lambda x: torch.clamp(x, 0.0, 1.0)),
    ("clamp_min", F64, [[-1.0, 0.0, 1.0]], lambda x: torch.clamp_min(x, 0.0)),
    ("relu", F64, [[-1.0, 0.0, 1.0]], lambda x: torch.relu(x)),
    ("abs", F64, [[-1.0, 0.0, 1.0]], lambda x: torch.abs(x)),
    ("sign", F64, [[-1.0, 0.0, 1.0]], lambda x: torch.sign(x)),
    ("hardtanh", F64, [[-2.0, -1.0, 0.0, 1.0, 2.0]], lambda x: F.hardtanh(x)),
    ("leaky_relu", F64, [[-1.0, 0.0, 1.0]], lambda x: F.leaky_relu(x, 0.1)),
    ("elu", F64, [[-1.0, 0.0, 1.0]], lambda x: F.elu(x)),
    ("hardswish", F64, [[-4.0, -3.0, 0.0, 3.0, 4.0]], lambda x: F.hardswish(x)),
    ("hardsigmoid", F64, [[-4.0, -3.0, 0.0, 3.0, 4.0]], lambda x: F.hardsigmoid(x)),
    ("softplus", F64, [[-100.0, 0.0, 20.0, 30.0, 100.0]], lambda x: F.softplus(x)),
    ("sigmoid", F64, [[-1000.0, 0.0, 1000.0]], lambda x: torch.sigmoid(x)),
    ("sigmoid_f32", F32, [[-200.0, 0.0, 200.0]], lambda x: torch.sigmoid(x)),
    ("tanh", F64, [[-1000.0, 0.0, 1000.0]], lambda x: torch.tanh(x)),
    ("log_sigmoid", F64, [[-1000.0, 0.0, 1000.0]], lambda x: F.logsigmoid(x)),
    ("silu", F64, [[-1000.0, 0.0, 1000.0]], lambda x: F.silu(x)),
    ("maximum_ties", F64, [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]], lambda a, b: torch.maximum(a, b)),
    ("minimum_ties", F64, [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]], lambda a, b: torch.minimum(a, b)),
    ("prod_one_zero", F64, [[2.0, 0.0, 3.0]], lambda x: torch.prod(x)),
    ("prod_two_zeros", F64, [[0.0, 0.0, 3.0]], lambda x: torch.prod(x)),
    ("cumprod_zero", F64, [[2.0, 0.0, 3.0, 4.0]], lambda x: torch.cumprod(x, 0)),
    # binary cross entropy at exactly 0 and 1 (sigmoid saturated): NOTE [BCE gradient]
    ("bce_f32", F32, [[0.0, 1.0, 0.5, 0.0, 1.0, 1e-30], [0.0, 1.0, 0.5, 1.0, 0.0, 0.0]],
     lambda x, t: F.binary_cross_entropy(x, t)),
    ("bce_f64", F64, [[0.0, 1.0, 0.5, 0.0, 1.0], [0.0, 1.0, 0.5, 1.0, 0.0]],
     lambda x, t: F.binary_cross_entropy(x, t, reduction="sum")),
    ("bce_weight", F64, [[0.0, 1.0, 0.25], [0.0, 0.0, 1.0], [2.0, 3.0, 0.5]],
     lambda x, t, w: F.binary_cross_entropy(x, t, weight=w.detach(), reduction="sum")),
    ("bce_logits", F64, [[-100.0, 0.0, 100.0, 100.0], [0.0, 1.0, 1.0, 0.0]],
     lambda x, t: F.binary_cross_entropy_with_logits(x, t)),
    ("l1_equal", F64, [[1.0, 2.0], [1.0, 3.0]], lambda a, b: F.l1_loss(a, b)),
    ("smooth_l1_at_beta", F64, [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]],
     lambda a, b: F.smooth_l1_loss(a, b, beta=1.0, reduction="sum")),
    ("kl_div_zero_target", F64, [[-1.0, -2.0], [0.0, 1.0]],
     lambda x, t: F.kl_div(x, t.detach(), reduction="sum")),
]


def fmt(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def vec(t):
    return ",".join(fmt(v) for v in t.detach().reshape(-1).double().tolist())


def main():
    out = sys.stdout
    out.write("# libtorch's values and gradients at the edges of the ops' domains "
              "(tools/make_edge_grads.py, torch %s)\n" % torch.__version__)
    out.write("# name\tdtype\tinputs (;)\tresult\tgradient of sum(result) per input (;, empty: none)\n")
    for name, dtype, inputs, fn in CASES:
        xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in inputs]
        y = fn(*xs)
        y.sum().backward()
        # (an input without a gradient, such as BCE's weight: an empty list)
        out.write("\t".join([
            name, "float32" if dtype == F32 else "float64",
            ";".join(vec(x) for x in xs), vec(y),
            ";".join(vec(x.grad) if x.grad is not None else "" for x in xs)
        ]) + "\n")


if __name__ == "__main__":
    main()
