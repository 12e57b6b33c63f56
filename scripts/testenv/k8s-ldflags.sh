# Sourced: sets $k8s_ldflags, the linker flags that stamp KUBERNETES_VERSION into a Kubernetes
# binary the way Kubernetes' own build does (so /version and the node report the release).
# Needs KUBERNETES_VERSION (versions.env).
k8s_minor=${KUBERNETES_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}
k8s_kv=k8s.io/component-base/version
k8s_ldflags="-s -X $k8s_kv.gitVersion=$KUBERNETES_VERSION -X $k8s_kv.gitMajor=1"
k8s_ldflags+=" -X $k8s_kv.gitMinor=$k8s_minor -X $k8s_kv.gitTreeState=clean"
k8s_ldflags+=" -X $k8s_kv.buildDate=1970-01-01T00:00:00Z"
