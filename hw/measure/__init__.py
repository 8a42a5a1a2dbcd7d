"""Measurements and checks on the GPUs at hand: ``bench`` + ``baselines`` (`mkernel bench`),
``calibrate`` + ``peer`` (`mkernel calibrate`), ``selftest`` + ``nvcc`` + ``device/`` (`mkernel
selftest`), ``bulk_probe`` (the data-movement benchmark), ``netcheck`` (a transport between real
nodes) and ``doctor`` (`mkernel doctor`).

Nothing below this layer imports it.
"""
