#!/usr/bin/env python3
"""NOTE [Layer check]: the include graph of src/ and include/ against the library's layers.

usage: check_layers.py ROOT [--stamp FILE] [--report]

Walks every `#include "..."` of the tree under ROOT (resolved against the including file's
folder, then ROOT/src, then ROOT/include; conditional includes count, so the check holds in every
configuration, CUDA included) and refuses, naming the file and the include chain that reaches the
forbidden header:

  kernels   src/cpu/** and src/cuda/** (the CPU and CUDA kernels, the CUDA module) reach no public
            API beyond the core types (KERNEL_PUBLIC below), and none of the dispatcher, the op
            table, autograd, the tracer, the nn and optim layers or the global-tensor layer: a
            kernel computes on its arguments (NOTE [No kernel dispatches]);
  runtime   the allocator, the generator and the thread pool reach neither the op table nor the
            dispatcher nor any public op header;
  op files  src/ops/** reach no header of the global-tensor layer but its SBP rules
            (src/global/rules.h; and comm.h, the communicator interface the CUDA backend's
            header carries, as for kernels): an op runs on global tensors through its rule, and its VJPs
            and composites make constants with the factories that follow a tensor (*_like,
            Tensor::new_*, of::broadcast_like), so no op file handles pieces itself.

The build runs it (src/meson.build: a target built by default, always stale), so a violation
fails `ninja`; tests/test_layers.cpp checks that it refuses a planted violation. --report prints
the layering measures of docs/ARCHITECTURE.md as well.
"""
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# The public headers a kernel may see: the tensor and its parts, errors, the runtime switches
# and the thread and grad-mode guards. Everything else under include/oneflow/ is an op, layer or
# frontend API.
KERNEL_PUBLIC = {
    "oneflow/tensor.h", "oneflow/device.h", "oneflow/dtype.h", "oneflow/error.h",
    "oneflow/placement.h", "oneflow/scalar.h", "oneflow/small_vector.h", "oneflow/fmt.h",
    "oneflow/runtime.h", "oneflow/guards.h", "oneflow/context.h",
}
# Internal headers that belong to the dispatcher and the layers above the kernels.
KERNEL_FORBIDDEN_INTERNAL = {
    "src/dispatch.h", "src/op_table.h", "src/promotion.h", "src/grad_plan.h", "src/decompose.h",
    "src/autocast.h", "src/output_layout.h", "src/cuda_profile.h",
}
KERNEL_FORBIDDEN_DIRS = ("src/autograd/", "src/trace/", "src/nn/", "src/optim/", "src/ops/",
                         "src/global/", "src/data/")
# The kernels share argument checks, attribute schemas and geometry with the op definitions
# through these headers of src/ops (each is checked like a kernel file itself), and the CUDA
# module reaches the communicator interface (NCCL is one of its backends).
KERNEL_ALLOWED_INTERNAL = {
    "src/ops/attr_schema.h", "src/ops/checks.h", "src/ops/conv_common.h", "src/ops/conv_geom.h",
    "src/ops/core_attrs.h", "src/ops/elem_kind.h", "src/ops/elementwise_attrs.h",
    "src/ops/functors.h", "src/ops/index_attrs.h", "src/ops/index_common.h",
    "src/ops/linalg_attrs.h", "src/ops/nn_attrs.h", "src/ops/nn_common.h",
    "src/ops/nn_extra_common.h", "src/ops/pool_common.h", "src/ops/random_attrs.h",
    "src/ops/random_common.h", "src/ops/reduce_common.h", "src/ops/rnn_common.h",
    "src/ops/shape_attrs.h", "src/global/comm.h",
}
RUNTIME_FILES = ("src/allocator.cpp", "src/allocator.h", "src/generator.cpp", "src/generator.h",
                 "src/thread_pool.cpp", "src/thread_pool.h", "src/large_pages.cpp",
                 "src/large_pages.h")
RUNTIME_FORBIDDEN_INTERNAL = {"src/dispatch.h", "src/op_table.h", "src/promotion.h",
                              "src/decompose.h", "src/autocast.h"}
SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh", ".inc")


def tree_files(root):
    out = []
    for top in ("src", "include"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return sorted(out)


def resolve(root, including, name):
    for base in (os.path.dirname(including), "src", "include"):
        cand = os.path.normpath(os.path.join(base, name)).replace(os.sep, "/")
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None  # generated (fusion_rtc_headers.h) or a system header written with quotes


def include_graph(root, files):
    graph = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        graph[f] = [r for r in (resolve(root, f, m) for m in INCLUDE_RE.findall(text)) if r]
    return graph


def first_chain(graph, start, bad):
    """The shortest include chain from `start` to a header for which bad(h) holds, or None."""
    prev = {start: None}
    queue = [start]
    while queue:
        nxt = []
        for f in queue:
            for h in graph.get(f, []):
                if h in prev:
                    continue
                prev[h] = f
                if bad(h):
                    chain = [h]
                    while prev[chain[-1]] is not None:
                        chain.append(prev[chain[-1]])
                    return list(reversed(chain))
                nxt.append(h)
        queue = nxt
    return None


def kernel_bad(h):
    if h.startswith("include/"):
        return h[len("include/"):] not in KERNEL_PUBLIC
    if h in KERNEL_ALLOWED_INTERNAL:
        return False
    return h in KERNEL_FORBIDDEN_INTERNAL or h.startswith(KERNEL_FORBIDDEN_DIRS)


def runtime_bad(h):
    if h.startswith("include/"):
        return h[len("include/"):] not in KERNEL_PUBLIC
    if h in KERNEL_ALLOWED_INTERNAL:
        return False
    return h in RUNTIME_FORBIDDEN_INTERNAL or h.startswith(("src/ops/", "src/autograd/",
                                                            "src/trace/", "src/nn/"))


def op_file_bad(h):
    return h.startswith("src/global/") and h not in ("src/global/rules.h", "src/global/comm.h")


def is_kernel_file(f):
    return f.startswith(("src/cpu/", "src/cuda/")) or f in KERNEL_ALLOWED_INTERNAL


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    stamp = argv[argv.index("--stamp") + 1] if "--stamp" in argv else None
    files = tree_files(root)
    graph = include_graph(root, files)
    errors = []
    kernels = [f for f in files if is_kernel_file(f)]
    for f in kernels:
        chain = first_chain(graph, f, kernel_bad)
        if chain:
            errors.append(f"kernel file {f} reaches {chain[-1]}: " + " -> ".join(chain))
    for f in files:
        if f in RUNTIME_FILES:
            chain = first_chain(graph, f, runtime_bad)
            if chain:
                errors.append(f"runtime file {f} reaches {chain[-1]}: " + " -> ".join(chain))
    for f in files:
        if f.startswith("src/ops/"):
            chain = first_chain(graph, f, op_file_bad)
            if chain:
                errors.append(f"op file {f} reaches {chain[-1]}: " + " -> ".join(chain))
    for e in errors:
        print(f"check_layers: {e}", file=sys.stderr)
    if "--report" in argv:
        src = [f for f in files if f.startswith("src/")]
        long_files = []
        for f in src:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                n = sum(1 for _ in fh)
            if n > 800:
                long_files.append(f"{f} ({n})")
        global_ops = [f for f in src if f.startswith("src/ops/") and "src/global/global.h" in graph[f]]
        op_errors = sum(1 for e in errors if e.startswith("op file"))
        print(f"kernel files checked: {len(kernels)}; reaching a forbidden header: "
              f"{sum(1 for e in errors if e.startswith('kernel'))}")
        print(f"runtime files reaching the op table or public ops: "
              f"{sum(1 for e in errors if e.startswith('runtime'))}")
        print(f"op files including global/global.h: {len(global_ops)} {global_ops}; reaching "
              f"any global-layer header but rules.h: {op_errors}")
        print(f"files in src/ over 800 lines: {len(long_files)} {long_files}")
    if errors:
        print(f"check_layers: {len(errors)} layering violation(s) (NOTE [Layer check], "
              "tools/check_layers.py)", file=sys.stderr)
        return 1
    if stamp:
        with open(stamp, "w") as fh:
            fh.write(f"{len(kernels)} kernel files checked\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
