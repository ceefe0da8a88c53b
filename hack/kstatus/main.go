// kstatus prints what kstatus (sigs.k8s.io/cli-utils/pkg/kstatus), the library Flux and kpt
// judge objects with, computes for each object read as JSON on stdin (one
// object, or a List as `kubectl get -o json` prints it): one line per object,
// `KIND NAMESPACE/NAME STATUS MESSAGE`. hns's e2e tests run it on hns's objects; built and cached
// by hack/build-kstatus.sh.
package main

import (
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
	// Kubernetes' own decoding, which keeps integers integers (kstatus reads generations as int64).
	decoded, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
	if err != nil {
		fail("stdin is not a Kubernetes object or list in JSON: %v", err)
	}
	var items []unstructured.Unstructured
	switch o := decoded.(type) {
	case *unstructured.UnstructuredList:
		items = o.Items
	case *unstructured.Unstructured:
		items = []unstructured.Unstructured{*o}
	default:
		fail("stdin holds a %T, not an object or a list", decoded)
	}
	for i := range items {
		u := &items[i]
		res, err := status.Compute(u)
		if err != nil {
			fail("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		fmt.Printf("%s %s/%s %s %s\n", u.GetKind(), u.GetNamespace(), u.GetName(), res.Status, res.Message)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kstatus: "+format+"\n", args...)
	os.Exit(1)
}
