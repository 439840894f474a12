"""Device discovery shared by the device daemon and the koordlet (no API, no role imports).

* :mod:`.nvml` — NVIDIA GPUs through NVML (``nvidia-ml-py``), with their sysfs PCI location and the
  GPU-to-GPU links;
* :mod:`.pci` — other accelerators (PCI vendor and class ids) and RDMA devices, from sysfs;
* :mod:`.xpu` — the device infos document (Koordinator's ``XPUDeviceInfo`` JSON array): model,
  reading (one file or a directory, as the koordlet does) and atomic writing;
* :mod:`.discovery` — the device daemon's scan: all of the above as one document.

Everything here takes its roots (``sys_root``) and its NVML module as arguments, so tests run it on
fake sysfs trees and a stand-in NVML. Only the standard library is imported (``pynvml`` lazily):
``scripts/device_check_nvml.py`` runs it on a GPU host with nothing else installed.
"""
