"""The runtime every role runs on: client, informers, workqueue, controllers, leader election,
config sources, probe servers and the Runtime that owns them (client-go semantics, plain dicts).

Roles import what they need from the modules: ``koordinator.runtime.runtime.Runtime``,
``koordinator.runtime.controller.Result``, ``koordinator.runtime.errors.NotFound``, ...
"""
