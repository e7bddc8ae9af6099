//go:build tools

// Package tools pins the helm CLI's module for build-tools.sh.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
