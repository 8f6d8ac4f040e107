"""Summarises py-spy's raw (collapsed) stacks of prof_loop.py: the samples inside Engine.generate,
the share of them under each key frame (inclusive; a frame counted once a stack), and the top
leaf frames (self time). Usage: python3 pyspy_summary.py RAW.txt [N_LEAVES]"""

import collections
import sys

KEYS = [
    # Python: the step loop and its pieces
    "Generation.run",
    "Generation._ar_step",
    "Generation._chain_step",
    "Generation._tree_step",
    "Generation._stream_deferred",
    "Generation._commit",
    "Generation._record",
    "Generation._target_choices",
    "Generation._first_token",
    "Engine._prefill",
    "Drafter.draft",
    "Drafter.inject",
    "Drafter._draft_tree",
    "Context.process",
    "Context.synchronize",
    "Context.sampled_tokens",
    "Context.sampled_token",
    "Context.seq_rm",
    "Context.seq_cp",
    "Context.logits",
    "Batch.add_tokens",
    "Batch.add_token",
    "Batch.clear",
    "StreamingDetokenizer.push",
    "rank_candidates",
    "build_tree",
    "leaf_sets",
    "keep_path",
    # native: llama.cpp's host path and CUDA
    "llama_process",
    "llama_decode",
    "llama_context::decode",
    "llama_context::process_ubatch",
    "llama_batch_allocr::init",
    "llama_kv_cache::prepare",
    "llama_kv_cache::apply_ubatch",
    "llm_graph_result::can_reuse",
    "llama_context::graph_build",
    "llm_graph_result::set_inputs",
    "ggml_backend_sched_alloc_graph",
    "ggml_backend_sched_graph_compute_async",
    "ggml_backend_sched_split_graph",
    "ggml_backend_cuda_graph_compute",
    "ggml_cuda_graph_update_required",
    "is_cuda_graph_update_required",
    "update_cuda_graph_executable",
    "cudaGraphLaunch",
    "cudaGraphExecUpdate",
    "cudaMemcpyAsync",
    "ggml_backend_tensor_set",
    "ggml_backend_tensor_get_async",
    "llama_synchronize",
    "ggml_backend_sched_synchronize",
    "cudaStreamSynchronize",
    "llama_get_sampled_tokens",
    "llama_memory_seq_rm",
]


def name(frame: str) -> str:
    return frame.split(" (", 1)[0]


def main() -> int:
    path = sys.argv[1]
    n_leaves = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    total = inside = 0
    incl = collections.Counter()
    leaves = collections.Counter()
    for line in open(path, encoding="utf-8", errors="replace"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        c = int(count)
        total += c
        frames = stack.split(";")
        names = [name(f) for f in frames]
        if "Engine.generate" not in names:
            continue
        inside += c
        for k in set(names) & set(KEYS):
            incl[k] += c
        leaf = frames[-1]
        # an unresolved frame (stripped library: libcuda) counts under its library
        leaves[leaf.split(" (", 1)[1].split(")")[0] if leaf.startswith("0x") and " (" in leaf else names[-1]] += c
    print(f"{path}: {total} samples, {inside} inside Engine.generate ({100 * inside / max(1, total):.1f} %)")
    print("inclusive, % of the samples inside Engine.generate:")
    for k in KEYS:
        if incl[k]:
            print(f"  {100 * incl[k] / inside:6.2f}  {k}")
    print(f"top {n_leaves} leaf frames (self), %:")
    for k, c in leaves.most_common(n_leaves):
        print(f"  {100 * c / inside:6.2f}  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
