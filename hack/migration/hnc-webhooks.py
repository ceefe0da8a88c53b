"""HNC's webhook configurations (as JSON on stdin) pointed at its manager on loopback.

HNC ships them with a Service in clientConfig and names that its kustomization prefixes with
`hnc-`, plus a patch (config/webhook/webhook_patch.yaml) that limits the objects webhook to
HNC's namespaces. This applies the same: prefix, that patch, and a URL with the CA that signed
the manager's certificate. Usage: hnc-webhooks.py URL CA_FILE < list.json > list.json
"""
import base64
import json
import sys

url, ca_file = sys.argv[1], sys.argv[2]
ca = base64.b64encode(open(ca_file, "rb").read()).decode()
# kubectl prints one JSON document per object, one after the other.
text, objects, pos = sys.stdin.read(), [], 0
decoder = json.JSONDecoder()
while text[pos:].strip():
    obj, end = decoder.raw_decode(text, pos + len(text[pos:]) - len(text[pos:].lstrip()))
    objects.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    pos = end
for obj in objects:
    obj["metadata"] = {"name": "hnc-" + obj["metadata"]["name"]}
    for hook in obj["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": url + path, "caBundle": ca}
        if hook["name"] == "objects.hnc.x-k8s.io":
            hook["timeoutSeconds"] = 2
            hook["namespaceSelector"] = {"matchLabels": {"hnc.x-k8s.io/included-namespace": "true"}}
            for rule in hook["rules"]:
                rule["scope"] = "Namespaced"
json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, sys.stdout)
