"""The host runtime: what one rank needs to launch the fused kernel and move data between nodes.

``context`` (the symmetric heap, command ring, epochs, error block and proxy of a rank), ``executor``
and ``launch`` (one rank's calls of one op), ``state`` (device-side ring, epochs, error block),
``proxy`` + ``native`` + ``csrc/`` (the native host proxy and its transports), ``transports``,
``netboot`` and ``nics`` (choosing and connecting network transports), ``emulate`` (several ranks
per GPU under MPS) and ``safety`` (the no-multicast environment and the default rendezvous).
"""
