"""The host runtime: what one rank needs to launch the fused kernel and move data between nodes.

``context`` (the symmetric heap, command ring, epochs, error block and proxy of a rank), ``executor``
(one rank's calls of one op) over ``fused_launch`` (the kernel's tables, counters and bound
arguments), ``binding`` (a call's tensors, address table and descriptors) and ``launch`` (the
keyword launch), ``state`` (device-side ring, epochs, error block),
``proxy`` + ``native`` + ``csrc/`` (the native host proxy and its transports), ``transports``,
``netboot`` and ``nics`` (choosing and connecting network transports), ``emulate`` (several ranks
per GPU under MPS) and ``safety`` (the no-multicast environment and the default rendezvous).
"""
