"""What the GPU tests run inside their rank processes, out of the installed package.

``rank`` (the fused kernel and the torch ops against the float64 oracle, call after call),
``long_run`` (issue 10's long run), ``training`` (TP training against torch-only models) and ``cases``
(the odd shapes the fused tests and tools run). Each rank function returns what it measured; the
tests (and the tools that launch them) judge it. Importable as ``harness`` because pytest puts
``tests/`` on ``sys.path`` (and ``emulate.launch``'s spawned ranks inherit it); tools insert it.
"""
