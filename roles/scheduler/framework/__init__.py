"""The scheduling framework: statuses, pod/node views, the snapshot and its change feeds, per-row memos
for plugins, the plugin API and its runner."""
