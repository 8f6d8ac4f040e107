"""Where a model's layers go when more than one GPU is there: llama.cpp's split mode, tensor split
and main GPU (``llama_model_params``), for the target and, separately, the drafter.

A plain value: the engine applies it when it loads a model (runtime.native), the pairing checks
plan with it before that (models.device_plan), the CLI and the settings panel parse it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: llama.h enum llama_split_mode (TENSOR, 3, needs a backend this build does not have)
SPLIT_MODES = {"none": 0, "layer": 1, "row": 2}
#: llama_max_devices() of the CUDA and CPU builds: the length of the tensor_split array
MAX_DEVICES = 16


@dataclass(frozen=True)
class Placement:
    split_mode: str = "layer"  # none: all on main_gpu; layer: whole layers per GPU; row: rows of each matrix
    tensor_split: tuple[float, ...] = ()  # share per GPU (empty: llama.cpp splits by free memory)
    main_gpu: int = 0  # split none: the GPU; row: the GPU for the non-matrix work

    def __post_init__(self):
        if self.split_mode not in SPLIT_MODES:
            raise ValueError(f"split mode must be one of {', '.join(SPLIT_MODES)}, not {self.split_mode!r}")
        object.__setattr__(self, "tensor_split", tuple(float(x) for x in self.tensor_split))
        if len(self.tensor_split) > MAX_DEVICES:
            raise ValueError(f"a tensor split names at most {MAX_DEVICES} GPUs, not {len(self.tensor_split)}")
        if any(x < 0 for x in self.tensor_split) or (self.tensor_split and sum(self.tensor_split) <= 0):
            raise ValueError(f"a tensor split needs shares >= 0 with a positive sum, not {self.tensor_split}")
        if self.main_gpu < 0:
            raise ValueError(f"main GPU must be >= 0, not {self.main_gpu}")

    @classmethod
    def parse(
        cls, split_mode: str | None = None, tensor_split: str | None = None, main_gpu: int | None = None
    ) -> "Placement":
        """From the CLI's / settings' strings: tensor_split as "3,1" or "3/1"."""
        shares: tuple[float, ...] = ()
        if tensor_split:
            try:
                shares = tuple(float(x) for x in tensor_split.replace("/", ",").split(",") if x.strip())
            except ValueError:
                raise ValueError(
                    f"tensor split must be numbers separated by commas (e.g. 3,1), not {tensor_split!r}"
                ) from None
        return cls(split_mode=split_mode or "layer", tensor_split=shares, main_gpu=main_gpu or 0)

    @property
    def is_default(self) -> bool:
        return self == Placement()

    def __str__(self) -> str:
        parts = [f"split {self.split_mode}"]
        if self.tensor_split:
            parts.append("tensor split " + ",".join(f"{x:g}" for x in self.tensor_split))
        if self.split_mode != "layer" or self.main_gpu:
            parts.append(f"main GPU {self.main_gpu}")
        return ", ".join(parts)
