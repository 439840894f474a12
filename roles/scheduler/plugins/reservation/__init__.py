"""Koordinator's Reservation plugin: reserve pods, owner matching, the reservation cache and its controller."""

from koordinator_roles.scheduler.plugins.reservation.plugin import NAME, Reservation, new

__all__ = ["NAME", "Reservation", "new"]
