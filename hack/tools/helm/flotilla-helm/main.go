// Command flotilla-helm renders a chart as `helm template` does, from the same packages
// of the same pinned helm.sh/helm/v4 module, for the flags flotilla passes:
//
//	flotilla-helm template RELEASE CHART --namespace NS [--values FILE]... [--include-crds]
//	    [--skip-tests] [--kube-version V] [--api-versions A]...
//
// Why it exists: the helm CLI links Helm's install machinery (Kubernetes clients,
// registries, storage drivers), and initialising those packages is most of one
// `helm template` run (~40 ms of ~50 ms on a small chart). This program links only the
// packages a client-side render uses (chart loader, dependency and values processing,
// schema validation, engine, manifest sort) and starts in about a quarter of that. The
// steps below are those of `helm template` (pkg/cmd/template.go, pkg/cmd/install.go,
// pkg/action/install.go and renderResources in pkg/action/action.go), in their order and
// with their messages; tests/it/sources.rs requires byte-identical output to the helm
// CLI on every fixture chart. Nothing here reaches a network: no lookup, no DNS, no
// dependency download, no post-renderer.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	v2loader "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

type options struct {
	release, chart, namespace string
	valuesFiles               []string
	includeCRDs, skipTests    bool
	kubeVersion               string
	apiVersions               []string
}

func main() {
	opts, err := parse(os.Args[1:])
	if err == nil {
		var out []byte
		out, err = render(opts)
		if err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	var o options
	if len(args) == 0 || args[0] != "template" {
		return o, errors.New("usage: flotilla-helm template RELEASE CHART --namespace NS [flags]")
	}
	var positional []string
	for i := 1; i < len(args); i++ {
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag needs an argument: %s", args[i])
			}
			i++
			return args[i], nil
		}
		var err error
		switch arg := args[i]; arg {
		case "--namespace":
			o.namespace, err = value()
		case "--values":
			var v string
			v, err = value()
			o.valuesFiles = append(o.valuesFiles, v)
		case "--kube-version":
			o.kubeVersion, err = value()
		case "--api-versions":
			var v string
			v, err = value()
			// A string-slice flag: comma-separated lists are split, as helm's are.
			o.apiVersions = append(o.apiVersions, strings.Split(v, ",")...)
		case "--include-crds":
			o.includeCRDs = true
		case "--skip-tests":
			o.skipTests = true
		default:
			if strings.HasPrefix(arg, "-") {
				return o, fmt.Errorf("unknown flag: %s", arg)
			}
			positional = append(positional, arg)
		}
		if err != nil {
			return o, err
		}
	}
	if len(positional) != 2 {
		return o, errors.New("expected a release name and a chart")
	}
	o.release, o.chart = positional[0], positional[1]
	if o.namespace == "" {
		o.namespace = "default"
	}
	return o, nil
}

// render is runInstall and Install.RunWithContext with a client-only dry run.
func render(o options) ([]byte, error) {
	if _, err := os.Stat(o.chart); err != nil {
		return nil, fmt.Errorf("path %q not found", o.chart)
	}
	vals := map[string]any{}
	for _, file := range o.valuesFiles {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		current, err := v2loader.LoadValues(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", file, err)
		}
		vals = v2loader.MergeMaps(vals, current)
	}
	charter, err := loader.Load(o.chart)
	if err != nil {
		return nil, err
	}
	chrt, ok := charter.(*chart.Chart)
	if !ok {
		return nil, errors.New("invalid chart apiVersion")
	}
	if t := chrt.Metadata.Type; t != "" && t != "application" {
		return nil, fmt.Errorf("%s charts are not installable", t)
	}
	if err := checkDependencies(chrt); err != nil {
		return nil, fmt.Errorf("an error occurred while checking for chart dependencies. You may need to run 'helm dependency build' to fetch missing dependencies: %w", err)
	}
	if err := chartutil.ValidateReleaseName(o.release); err != nil {
		return nil, fmt.Errorf("release name check failed: release name %q: %w", o.release, err)
	}
	if err := chartutil.ProcessDependencies(chrt, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies processing failed: %w", err)
	}
	caps := common.DefaultCapabilities.Copy()
	if o.kubeVersion != "" {
		kube, err := common.ParseKubeVersion(o.kubeVersion)
		if err != nil {
			return nil, fmt.Errorf("invalid kube version '%s': %w", o.kubeVersion, err)
		}
		caps.KubeVersion = *kube
	}
	caps.APIVersions = append(caps.APIVersions, o.apiVersions...)
	releaseOptions := common.ReleaseOptions{Name: o.release, Namespace: o.namespace, Revision: 1, IsInstall: true}
	values, err := commonutil.ToRenderValuesWithSchemaValidation(chrt, vals, releaseOptions, caps, false)
	if err != nil {
		return nil, err
	}
	hooks, manifest, err := renderResources(chrt, values, caps, o.includeCRDs)
	if err != nil {
		return nil, err
	}
	// pkg/cmd/template.go: the manifest, then the hooks.
	var out bytes.Buffer
	fmt.Fprintln(&out, strings.TrimSpace(manifest))
	for _, h := range hooks {
		if o.skipTests && slices.Contains(h.Events, release.HookTest) {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return out.Bytes(), nil
}

// checkDependencies is action.CheckDependencies: every dependency Chart.yaml names is
// in charts/.
func checkDependencies(chrt *chart.Chart) error {
	var missing []string
	for _, r := range chrt.Metadata.Dependencies {
		if !slices.ContainsFunc(chrt.Dependencies(), func(d *chart.Chart) bool { return d.Name() == r.Name }) {
			missing = append(missing, r.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}

// renderResources is Configuration.renderResources for `helm template`: no output
// directory, no post-renderer, no cluster, no DNS.
func renderResources(chrt *chart.Chart, values common.Values, caps *common.Capabilities, includeCRDs bool) ([]*release.Hook, string, error) {
	if chrt.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", chrt.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	var e engine.Engine
	files, err := e.RenderWithContext(context.Background(), chrt, values)
	if err != nil {
		return nil, "", err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	if includeCRDs {
		for _, crd := range chrt.CRDObjects() {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return hooks, b.String(), nil
}
