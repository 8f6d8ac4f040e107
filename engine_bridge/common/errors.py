"""Typed errors the engine raises instead of letting llama.cpp abort the process."""

from __future__ import annotations


class EngineError(RuntimeError):
    """Base class: something the user can read and act on."""


class ModelLoadError(EngineError):
    """llama.cpp could not load a file or create a context for it."""


class IncompatiblePairError(EngineError):
    """The target and drafter cannot run together; ``report`` holds the failed checks."""

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report

    def __reduce__(self):  # keeps the report across a process boundary (runtime.engine_process)
        return (type(self), (str(self), self.report))

    @property
    def failures(self):
        return [] if self.report is None else self.report.failures


class ContextOverflowError(EngineError):
    """The prompt (or the conversation) does not fit in the context window."""


class UnsupportedSettingError(EngineError):
    """A setting this build or this pair cannot honour (KV pair without flash attention, ...)."""


class DecodeError(EngineError):
    """llama_process returned an error code."""


class UnreadableModelError(EngineError):
    """A model file or folder cannot be read at all (missing, not GGUF/safetensors, header cut short)."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path

    def __reduce__(self):
        return (type(self), (str(self), self.path))
