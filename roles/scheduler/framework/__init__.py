"""The scheduling framework: statuses, pod/node views, the snapshot, the plugin API and its runner."""
