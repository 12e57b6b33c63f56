# Pod security (POD-11 to POD-15): the restricted profile for every container of every
# pod the chart renders: the Deployment's main and init containers and the `helm test` pod.
package main

import rego.v1

# A container's effective setting: its own securityContext wins over the pod's.
effective(entry, field) := value if {
	value := entry.container.securityContext[field]
} else := value if {
	value := entry.pod_context[field]
}

# --- POD-11: non-root with a non-zero UID, seccomp RuntimeDefault -------------------------------

deny contains msg if {
	some entry in pod_containers
	not runs_as_non_root(entry)
	msg := concat("", ["POD-11 ", entry.label, ": container ", entry.container.name, ": runAsNonRoot must be true"])
}

deny contains msg if {
	some entry in pod_containers
	not has_non_zero_uid(entry)
	msg := concat("", ["POD-11 ", entry.label, ": container ", entry.container.name, ": runAsUser must be set to a non-zero UID"])
}

# Helpers wrap the lookup, so `not` negates the whole test: OPA evaluates a function call nested
# in a negated expression before the negation (an undefined result then makes the body fail).
runs_as_non_root(entry) if effective(entry, "runAsNonRoot") == true

has_non_zero_uid(entry) if {
	uid := effective(entry, "runAsUser")
	is_number(uid)
	uid > 0
}

deny contains msg if {
	some entry in pod_containers
	seccomp_type(entry) != "RuntimeDefault"
	msg := concat("", ["POD-11 ", entry.label, ": container ", entry.container.name, ": seccompProfile.type must be RuntimeDefault"])
}

seccomp_type(entry) := kind if {
	profile := effective(entry, "seccompProfile")
	kind := object.get(profile, "type", "")
} else := ""

# --- POD-12: no escalation, not privileged, read-only root, drop ALL and add nothing -------------

container_context(entry) := object.get(entry.container, "securityContext", {})

deny contains msg if {
	some entry in pod_containers
	not container_context(entry).allowPrivilegeEscalation == false
	msg := concat("", ["POD-12 ", entry.label, ": container ", entry.container.name, ": allowPrivilegeEscalation must be false"])
}

deny contains msg if {
	some entry in pod_containers
	container_context(entry).privileged == true
	msg := concat("", ["POD-12 ", entry.label, ": container ", entry.container.name, ": privileged must not be true"])
}

deny contains msg if {
	some entry in pod_containers
	not container_context(entry).readOnlyRootFilesystem == true
	msg := concat("", ["POD-12 ", entry.label, ": container ", entry.container.name, ": readOnlyRootFilesystem must be true"])
}

deny contains msg if {
	some entry in pod_containers
	not "ALL" in object.get(container_context(entry), ["capabilities", "drop"], [])
	msg := concat("", ["POD-12 ", entry.label, ": container ", entry.container.name, ": capabilities.drop must contain ALL"])
}

deny contains msg if {
	some entry in pod_containers
	added := object.get(container_context(entry), ["capabilities", "add"], [])
	count(added) > 0
	msg := concat("", ["POD-12 ", entry.label, ": container ", entry.container.name, ": capabilities.add must be empty, has [", concat(", ", added), "]"])
}

deny contains msg if {
	some entry in pod_containers
	procmount := object.get(container_context(entry), "procMount", "Default")
	procmount != "Default"
	msg := concat("", ["POD-12 ", entry.label, ": container ", entry.container.name, ": procMount must be Default"])
}

# --- POD-13: no host namespaces, ports or paths ---------------------------------------------

deny contains msg if {
	some obj in pod_objects
	some field in ["hostNetwork", "hostPID", "hostIPC"]
	object.get(pod_spec(obj), field, false) == true
	msg := concat("", ["POD-13 ", label(obj), ": ", field, " shares a host namespace"])
}

deny contains msg if {
	some entry in pod_containers
	some port in object.get(entry.container, "ports", [])
	object.get(port, "hostPort", 0) != 0
	msg := concat("", ["POD-13 ", entry.label, ": container ", entry.container.name, ": hostPort ", format_int(port.hostPort, 10), " binds a port on the node"])
}

deny contains msg if {
	some obj in pod_objects
	some volume in object.get(pod_spec(obj), "volumes", [])
	volume.hostPath
	msg := concat("", ["POD-13 ", label(obj), ": volume ", volume.name, " mounts a hostPath"])
}

# --- POD-14: a dedicated ServiceAccount; the token only where the API is used --------------------

deny contains msg if {
	some obj in pod_objects
	not is_test_hook(obj)
	account := object.get(pod_spec(obj), "serviceAccountName", "")
	account in {"", "default"}
	msg := concat("", ["POD-14 ", label(obj), ": runs as the namespace's default ServiceAccount; use the chart's own"])
}

deny contains msg if {
	some obj in pod_objects
	is_test_hook(obj)
	not pod_spec(obj).automountServiceAccountToken == false
	msg := concat("", ["POD-14 ", label(obj), ": the test pod does not use the API; set automountServiceAccountToken: false"])
}

# Seen whole: a pod's ServiceAccount is one the chart renders, when the chart renders any.
deny contains msg if {
	combined
	rendered := {obj.metadata.name | some obj in objects_of_kind("ServiceAccount")}
	count(rendered) > 0
	some obj in pod_objects
	not is_test_hook(obj)
	account := object.get(pod_spec(obj), "serviceAccountName", "")
	not account in rendered
	msg := concat("", ["POD-14 ", label(obj), ": ServiceAccount ", account, " is not the one the chart renders [", concat(", ", sort(rendered)), "]"])
}

# An automounted token is extended to a year by default (--service-account-extend-token-expiration);
# a projected one lives expirationSeconds and the kubelet renews it.
deny contains msg if {
	some obj in pod_objects
	not is_test_hook(obj)
	not pod_spec(obj).automountServiceAccountToken == false
	msg := concat("", ["POD-14 ", label(obj), ": mounts the automatically injected token, which the API server may extend to a year; set automountServiceAccountToken: false and mount a projected serviceAccountToken with expirationSeconds"])
}

max_token_seconds := 86400

deny contains msg if {
	some obj in pod_objects
	some volume in object.get(pod_spec(obj), "volumes", [])
	some source in object.get(volume, ["projected", "sources"], [])
	seconds := object.get(source, ["serviceAccountToken", "expirationSeconds"], 3600)
	is_number(seconds)
	seconds > max_token_seconds
	msg := concat("", ["POD-14 ", label(obj), ": volume ", volume.name, ": a projected token of ", format_int(seconds, 10), " s outlives a day; use at most ", format_int(max_token_seconds, 10), " (serviceAccount.tokenExpirationSeconds)"])
}

# The file store never calls the API server, so its pods need no token at all.
warn contains msg if {
	combined
	some config in runtime_configs
	object.get(config, ["store", "backend"], "") == "file"
	some obj in pod_objects
	not is_test_hook(obj)
	not pod_spec(obj).automountServiceAccountToken == false
	msg := concat("", ["POD-14 ", label(obj), ": the file store does not use the API; set automountServiceAccountToken: false"])
}

# --- POD-15: pinned image, resources, probes, volume types ------------------------------------

# The tag is what follows the last ':' after the last '/', so a registry port is not a tag.
image_tag(image) := tag if {
	parts := split(image, "/")
	last := parts[count(parts) - 1]
	contains(last, ":")
	pieces := split(last, ":")
	tag := pieces[count(pieces) - 1]
}

image_digest(image) if contains(image, "@sha256:")

deny contains msg if {
	some entry in pod_containers
	image := object.get(entry.container, "image", "")
	not image_digest(image)
	not image_tag(image)
	msg := concat("", ["POD-15 ", entry.label, ": container ", entry.container.name, ": image ", image, " has no tag or digest"])
}

deny contains msg if {
	some entry in pod_containers
	image := object.get(entry.container, "image", "")
	not image_digest(image)
	image_tag(image) in {"latest", ""}
	msg := concat("", ["POD-15 ", entry.label, ": container ", entry.container.name, ": image ", image, " uses the moving tag latest"])
}

warn contains msg if {
	some entry in pod_containers
	image := object.get(entry.container, "image", "")
	not image_digest(image)
	image_tag(image)
	not image_tag(image) in {"latest", ""}
	msg := concat("", ["POD-15 ", entry.label, ": container ", entry.container.name, ": image ", image, " is pinned by tag only; a digest cannot move"])
}

required_resources := [["requests", "cpu"], ["requests", "memory"], ["limits", "memory"]]

deny contains msg if {
	some entry in pod_containers
	some path in required_resources
	object.get(entry.container, array.concat(["resources"], path), null) == null
	msg := concat("", ["POD-15 ", entry.label, ": container ", entry.container.name, ": resources.", path[0], ".", path[1], " must be set"])
}

# A CPU limit throttles a healthy pod; many platforms leave it out, so it only warns.
warn contains msg if {
	some entry in pod_containers
	object.get(entry.container, ["resources", "limits", "cpu"], null) == null
	msg := concat("", ["POD-15 ", entry.label, ": container ", entry.container.name, ": resources.limits.cpu is not set"])
}

deny contains msg if {
	some obj in pod_objects
	not is_test_hook(obj)
	some container in object.get(pod_spec(obj), "containers", [])
	some probe in ["livenessProbe", "readinessProbe"]
	not container[probe]
	msg := concat("", ["POD-15 ", label(obj), ": container ", container.name, ": ", probe, " must be set"])
}

# configMap, emptyDir, projected and secret, plus persistentVolumeClaim: the file store may keep
# its folder on an existing claim for durability.
allowed_volume_sources := {"configMap", "emptyDir", "projected", "secret", "persistentVolumeClaim"}

deny contains msg if {
	some obj in pod_objects
	some volume in object.get(pod_spec(obj), "volumes", [])
	some source in object.keys(volume)
	source != "name"
	not source in allowed_volume_sources
	msg := concat("", ["POD-15 ", label(obj), ": volume ", volume.name, " uses the ", source, " source; allowed: ", concat(", ", sort(allowed_volume_sources))])
}
