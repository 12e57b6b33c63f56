# Durability advisories (STORE-1): values that are valid and render, but lose checkpoints.
package main

import rego.v1

# Seen whole: the file store's folder (store.path of the runtime config) mounted from an
# emptyDir is deleted with the pod, so every restart replays or skips what was collected.
warn contains msg if {
	combined
	some config in runtime_configs
	object.get(config, ["store", "backend"], "") == "file"
	folder := object.get(config, ["store", "path"], "")
	some obj in pod_objects
	not is_test_hook(obj)
	spec := pod_spec(obj)
	some entry in containers(spec)
	some mount in object.get(entry.container, "volumeMounts", [])
	mount.mountPath == folder
	some volume in object.get(spec, "volumes", [])
	volume.name == mount.name
	volume.emptyDir
	msg := concat("", ["STORE-1 ", label(obj), ": the file store's folder ", folder, " is on the emptyDir volume ", volume.name, ", deleted with the pod: checkpoints do not survive a restart or reschedule; use a PersistentVolumeClaim (checkpoint.file.existingClaim)"])
}
