"""Measurements and checks on the GPUs at hand: ``bench`` + ``baselines`` (`mkernel bench`),
``calibrate`` + ``peer`` (`mkernel calibrate`), ``selftest`` + ``ring_kernels`` (`mkernel selftest`,
on the fused kernel's own protocol code), ``bulk_probe`` (the data-movement benchmark), ``netcheck``
(a transport between real nodes) and ``doctor`` (`mkernel doctor`).

Nothing below this layer imports it.
"""
