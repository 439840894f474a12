"""Koordinator's DeviceShare plugin: whole and fractional GPU, RDMA and FPGA allocation from Device objects."""

from koordinator_roles.scheduler.plugins.deviceshare.plugin import NAME, DeviceShare, new

__all__ = ["NAME", "DeviceShare", "new"]
