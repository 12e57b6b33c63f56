# Fixtures: the chart's default render (release cr, namespace ns1), as the policies see it.
# Tests patch one object at a time with json.patch and check the exact verdict.
package main

import rego.v1

fixture_service_account := {
	"apiVersion": "v1",
	"kind": "ServiceAccount",
	"metadata": {
		"name": "cr-checkpoint-runtime",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "runtime",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		}
	},
	"automountServiceAccountToken": false
}

fixture_config := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {
		"name": "cr-checkpoint-runtime-config",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "runtime",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		}
	},
	"data": {
		"config.json": "{\n  \"collectors\": [],\n  \"http\": {\n    \"bindAddress\": \"0.0.0.0\",\n    \"port\": 8080\n  },\n  \"leaderElection\": {\n    \"enabled\": true,\n    \"leaseDurationSeconds\": 15,\n    \"renewDeadlineSeconds\": 10,\n    \"retryPeriodSeconds\": 2\n  },\n  \"sink\": {\n    \"kind\": \"stdout\"\n  },\n  \"store\": {\n    \"backend\": \"kubernetes\",\n    \"deadlineSeconds\": 30,\n    \"debounceSeconds\": 1,\n    \"leaseName\": \"cr-checkpoint-runtime\",\n    \"namespace\": \"ns1\"\n  }\n}\n"
	}
}

fixture_role := {
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind": "Role",
	"metadata": {
		"name": "cr-checkpoint-runtime",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "runtime",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		}
	},
	"rules": [
		{
			"apiGroups": [
				""
			],
			"resources": [
				"configmaps"
			],
			"verbs": [
				"get",
				"list",
				"update",
				"create"
			]
		},
		{
			"apiGroups": [
				"coordination.k8s.io"
			],
			"resources": [
				"leases"
			],
			"verbs": [
				"get",
				"update"
			],
			"resourceNames": [
				"cr-checkpoint-runtime"
			]
		},
		{
			"apiGroups": [
				"coordination.k8s.io"
			],
			"resources": [
				"leases"
			],
			"verbs": [
				"create"
			]
		}
	]
}

fixture_role_binding := {
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind": "RoleBinding",
	"metadata": {
		"name": "cr-checkpoint-runtime",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "runtime",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		}
	},
	"roleRef": {
		"apiGroup": "rbac.authorization.k8s.io",
		"kind": "Role",
		"name": "cr-checkpoint-runtime"
	},
	"subjects": [
		{
			"kind": "ServiceAccount",
			"name": "cr-checkpoint-runtime",
			"namespace": "ns1"
		}
	]
}

fixture_service := {
	"apiVersion": "v1",
	"kind": "Service",
	"metadata": {
		"name": "cr-checkpoint-runtime",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "runtime",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		}
	},
	"spec": {
		"type": "ClusterIP",
		"selector": {
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr"
		},
		"ports": [
			{
				"name": "http",
				"port": 8080,
				"targetPort": "http",
				"protocol": "TCP"
			}
		]
	}
}

fixture_deployment := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {
		"name": "cr-checkpoint-runtime",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "runtime",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		}
	},
	"spec": {
		"replicas": 2,
		"selector": {
			"matchLabels": {
				"app.kubernetes.io/name": "checkpoint-runtime",
				"app.kubernetes.io/instance": "cr"
			}
		},
		"template": {
			"metadata": {
				"labels": {
					"helm.sh/chart": "checkpoint-runtime-0.1.0",
					"app.kubernetes.io/name": "checkpoint-runtime",
					"app.kubernetes.io/instance": "cr",
					"app.kubernetes.io/version": "0.1.0",
					"app.kubernetes.io/component": "runtime",
					"app.kubernetes.io/part-of": "checkpoint-runtime",
					"app.kubernetes.io/managed-by": "Helm"
				},
				"annotations": {
					"checksum/config": "0"
				}
			},
			"spec": {
				"serviceAccountName": "cr-checkpoint-runtime",
				"automountServiceAccountToken": true,
				"securityContext": {
					"runAsNonRoot": true,
					"runAsUser": 10001,
					"runAsGroup": 10001,
					"fsGroup": 10001,
					"seccompProfile": {
						"type": "RuntimeDefault"
					}
				},
				"containers": [
					{
						"name": "runtime",
						"image": "checkpoint-runtime:0.1.0",
						"imagePullPolicy": "IfNotPresent",
						"args": [
							"run",
							"--config",
							"/etc/checkpoint-runtime/config.json"
						],
						"env": [
							{
								"name": "POD_NAME",
								"valueFrom": {
									"fieldRef": {
										"fieldPath": "metadata.name"
									}
								}
							}
						],
						"ports": [
							{
								"name": "http",
								"containerPort": 8080,
								"protocol": "TCP"
							}
						],
						"livenessProbe": {
							"httpGet": {
								"path": "/healthz",
								"port": "http"
							},
							"failureThreshold": 3,
							"initialDelaySeconds": 5,
							"periodSeconds": 10,
							"timeoutSeconds": 2
						},
						"readinessProbe": {
							"httpGet": {
								"path": "/readyz",
								"port": "http"
							},
							"failureThreshold": 3,
							"initialDelaySeconds": 2,
							"periodSeconds": 5,
							"timeoutSeconds": 2
						},
						"resources": {
							"limits": {
								"cpu": "500m",
								"memory": "512Mi"
							},
							"requests": {
								"cpu": "50m",
								"memory": "128Mi"
							}
						},
						"securityContext": {
							"allowPrivilegeEscalation": false,
							"privileged": false,
							"readOnlyRootFilesystem": true,
							"runAsNonRoot": true,
							"capabilities": {
								"drop": [
									"ALL"
								]
							},
							"seccompProfile": {
								"type": "RuntimeDefault"
							}
						},
						"volumeMounts": [
							{
								"name": "config",
								"mountPath": "/etc/checkpoint-runtime",
								"readOnly": true
							},
							{
								"name": "tmp",
								"mountPath": "/tmp"
							}
						]
					}
				],
				"volumes": [
					{
						"name": "config",
						"configMap": {
							"name": "cr-checkpoint-runtime-config"
						}
					},
					{
						"name": "tmp",
						"emptyDir": {
							"sizeLimit": "64Mi"
						}
					}
				]
			}
		}
	}
}

fixture_test_pod := {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": {
		"name": "cr-checkpoint-runtime-test",
		"namespace": "ns1",
		"labels": {
			"helm.sh/chart": "checkpoint-runtime-0.1.0",
			"app.kubernetes.io/name": "checkpoint-runtime",
			"app.kubernetes.io/instance": "cr",
			"app.kubernetes.io/version": "0.1.0",
			"app.kubernetes.io/component": "test",
			"app.kubernetes.io/part-of": "checkpoint-runtime",
			"app.kubernetes.io/managed-by": "Helm"
		},
		"annotations": {
			"helm.sh/hook": "test",
			"helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"
		}
	},
	"spec": {
		"restartPolicy": "Never",
		"serviceAccountName": "cr-checkpoint-runtime",
		"automountServiceAccountToken": false,
		"securityContext": {
			"runAsNonRoot": true,
			"runAsUser": 10001,
			"runAsGroup": 10001,
			"fsGroup": 10001,
			"seccompProfile": {
				"type": "RuntimeDefault"
			}
		},
		"containers": [
			{
				"name": "healthz",
				"image": "checkpoint-runtime:0.1.0",
				"imagePullPolicy": "IfNotPresent",
				"command": [
					"python3",
					"-c",
					"probe"
				],
				"resources": {
					"limits": {
						"cpu": "100m",
						"memory": "64Mi"
					},
					"requests": {
						"cpu": "10m",
						"memory": "32Mi"
					}
				},
				"securityContext": {
					"allowPrivilegeEscalation": false,
					"privileged": false,
					"readOnlyRootFilesystem": true,
					"runAsNonRoot": true,
					"capabilities": {
						"drop": [
							"ALL"
						]
					},
					"seccompProfile": {
						"type": "RuntimeDefault"
					}
				}
			}
		]
	}
}

fixture_release := [fixture_service_account, fixture_config, fixture_role, fixture_role_binding, fixture_service, fixture_deployment, fixture_test_pod]
