"""Drafter training over several GPUs of one host: one process per GPU (``torchrun``), the drafter
in DistributedDataParallel, every rank drawing its own batches from the same pool.

Why: a machine of four GPUs costs a session about what 1.5 machines of one do, so a sitting trains
about 2.7 times the steps for the same device time. The gradient is averaged over the ranks, so a
step sees ``batch x world`` sequences.

Rank 0 alone validates, logs, checkpoints and writes the drafter; the others follow its decisions
(stop, the schedule's progress, the block size), which it broadcasts every step, so every rank
takes the same number of steps and no collective call waits for a rank that has left.

A single process (no ``WORLD_SIZE`` in the environment, or 1) gets a group of one whose calls do
nothing: the trainer's code path is the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass
class Group:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str = ""

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def multi(self) -> bool:
        return self.world > 1

    def decide(self, values: list[float], dev) -> list[float]:
        """Rank 0's ``values`` on every rank (one small broadcast; a no-op for one process)."""
        if not self.multi:
            return values
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=dev if self.backend == "nccl" else "cpu")
        dist.broadcast(t, 0)
        return [float(v) for v in t.tolist()]

    def wrap(self, module):
        """``module`` in DistributedDataParallel (it starts every rank from rank 0's weights)."""
        if not self.multi:
            return module
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.local_rank] if self.backend == "nccl" else None
        return DistributedDataParallel(module, device_ids=ids)

    def replicas_agree(self, module, dev) -> bool:
        """Whether every rank holds the same weights (a sum and a weighted sum of all parameters,
        compared across ranks): DDP keeps them equal; a rank that drifted would mean its gradients
        were not averaged."""
        if not self.multi:
            return True
        import torch
        import torch.distributed as dist

        with torch.no_grad():
            s = torch.zeros(2, dtype=torch.float64, device=dev if self.backend == "nccl" else "cpu")
            for i, p in enumerate(module.parameters()):
                v = p.detach().double()
                s[0] += v.sum().to(s.device)
                s[1] += (v.flatten() * torch.linspace(1, 2, v.numel(), dtype=torch.float64, device=v.device)).sum().to(
                    s.device
                ) * (i + 1)
            lo, hi = s.clone(), s.clone()
            dist.all_reduce(lo, op=dist.ReduceOp.MIN)
            dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        return bool(torch.allclose(lo, hi, rtol=1e-9, atol=0.0))

    def barrier(self) -> None:
        if self.multi:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.multi:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def from_env(device: str | None) -> Group:
    """The process group ``torchrun`` describes in the environment (WORLD_SIZE, RANK, LOCAL_RANK,
    MASTER_ADDR/PORT), joined; a group of one without it. NCCL on CUDA (its NVLink multicast stays
    off: the lending machines share their GPUs), gloo on the CPU (the tests)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return Group()
    import torch
    import torch.distributed as dist

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cpu = device == "cpu"
    backend = "gloo" if cpu else "nccl"
    if not cpu:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return Group(rank=rank, world=world, local_rank=local, backend=backend)


def shard_of(text: str | None) -> tuple[int, int]:
    """``"K/N"`` -> (K, N): this process generates the K-th of N shares of the prompts."""
    if not text:
        return (0, 1)
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: K/N, e.g. 0/4") from None
    if not (n >= 1 and 0 <= k < n):
        raise ValueError(f"--shard {text!r}: K/N with 0 <= K < N")
    return (k, n)


def summary_fields(group: Group, batch: int) -> dict[str, Any]:
    return {"world": group.world, "global_batch": batch * group.world}
