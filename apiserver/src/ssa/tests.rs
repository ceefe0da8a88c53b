use serde_json::json;

use super::*;

const KVP: Shape = Shape::Struct(&[("key", Shape::Atomic), ("value", Shape::Atomic)]);
const RESOURCE: Shape =
    Shape::Struct(&[("group", Shape::Atomic), ("resource", Shape::Atomic), ("mode", Shape::Atomic)]);
const SHAPE: Shape = Shape::Struct(&[
    ("metadata", Shape::Struct(&[("labels", Shape::Map), ("annotations", Shape::Map)])),
    (
        "spec",
        Shape::Struct(&[
            ("parent", Shape::Atomic),
            ("allowCascadingDeletion", Shape::Atomic),
            ("labels", Shape::AssocList { keys: &["key"], item: &KVP }),
            ("resources", Shape::AssocList { keys: &["group", "resource"], item: &RESOURCE }),
        ]),
    ),
]);
const NOW: &str = "2024-05-01T10:00:00Z";
const LATER: &str = "2024-05-02T10:00:00Z";

fn fields(v: Value) -> FieldSet {
    FieldSet::from_fields_v1(&v).unwrap()
}

fn entry(manager: &str, operation: Operation, v: Value) -> Entry {
    Entry { manager: manager.into(), operation, time: Some(NOW.into()), fields: fields(v) }
}

fn owned_by<'a>(managed: &'a [Entry], manager: &str) -> Option<&'a Entry> {
    managed.iter().find(|e| e.manager == manager)
}

#[test]
fn field_sets_cover_leaves_map_entries_and_list_items() {
    let obj = json!({
        "apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchyConfiguration",
        "metadata": {"name": "hierarchy", "uid": "u", "labels": {"team": "a"}, "annotations": {}},
        "spec": {"parent": "p", "labels": [{"key": "env", "value": "prod"}],
                 "resources": [{"resource": "secrets", "mode": "Propagate"}]},
        "status": {"children": ["x"]}
    });
    let set = FieldSet::of(&SHAPE, &obj);
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:metadata": {"f:labels": {"f:team": {}}},
            "f:spec": {
                "f:parent": {},
                "f:labels": {"k:{\"key\":\"env\"}": {".": {}, "f:key": {}, "f:value": {}}},
                "f:resources": {"k:{\"group\":\"\",\"resource\":\"secrets\"}":
                    {".": {}, "f:mode": {}, "f:resource": {}}}
            }
        })
    );
}

#[test]
fn fields_v1_round_trips_and_canonicalizes_keys() {
    let v = json!({
        "f:metadata": {"f:annotations": {"f:a.b/c": {}}},
        "f:spec": {"f:resources": {"k:{\"resource\":\"secrets\",\"group\":\"\"}": {".": {}, "f:mode": {}}}}
    });
    let set = fields(v);
    let again = FieldSet::from_fields_v1(&set.to_fields_v1()).unwrap();
    assert_eq!(set, again);
    assert!(set.to_fields_v1().to_string().contains(r#"k:{\"group\":\"\",\"resource\":\"secrets\"}"#));
    assert!(FieldSet::from_fields_v1(&json!({"i:0": {}})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"f:spec": 1})).is_err());
    assert!(FieldSet::from_fields_v1(&json!({"k:[1]": {}})).is_err());
}

#[test]
fn paths_print_like_structured_merge_diff() {
    let set = fields(json!({"f:spec": {"f:resources": {"k:{\"group\":\"\",\"resource\":\"s\"}": {}}}}));
    let p = set.0.iter().next().unwrap();
    assert_eq!(path_string(p), r#".spec.resources[group="",resource="s"]"#);
}

#[test]
fn a_first_apply_owns_what_it_sets() {
    let live = json!({"metadata": {"name": "hierarchy"}});
    let config = json!({"apiVersion": "x", "metadata": {"name": "hierarchy", "labels": {"a": "1"}},
                        "spec": {"parent": "p", "unknown": 1}});
    let out = apply(&SHAPE, &live, &[], &config, "flux", false, NOW).unwrap();
    assert_eq!(out.object["spec"], json!({"parent": "p"}));
    assert_eq!(out.object["metadata"], json!({"name": "hierarchy", "labels": {"a": "1"}}));
    assert_eq!(out.managed.len(), 1);
    assert_eq!(out.managed[0].operation, Operation::Apply);
    assert_eq!(
        out.managed[0].fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:parent": {}}})
    );
}

#[test]
fn a_changed_field_owned_by_another_manager_conflicts() {
    let live = json!({"spec": {"parent": "p", "allowCascadingDeletion": true}});
    let managed = vec![
        entry("kubectl-client-side-apply", Operation::Update, json!({"f:spec": {"f:parent": {}}})),
        entry("flux", Operation::Apply, json!({"f:spec": {"f:allowCascadingDeletion": {}}})),
    ];
    let config = json!({"spec": {"parent": "q", "allowCascadingDeletion": false}});
    let err = apply(&SHAPE, &live, &managed, &config, "argo", false, NOW).unwrap_err();
    assert_eq!(err.0.len(), 2);
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"flux\":\n- .spec.allowCascadingDeletion\n\
         conflicts with \"kubectl-client-side-apply\" using hnc.x-k8s.io/v1alpha2 at 2024-05-01T10:00:00Z:\n- .spec.parent"
    );
    let one = apply(&SHAPE, &live, &managed[..1], &json!({"spec": {"parent": "q"}}), "argo", false, NOW)
        .unwrap_err();
    assert_eq!(
        one.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using hnc.x-k8s.io/v1alpha2 at 2024-05-01T10:00:00Z: .spec.parent"
    );
}

#[test]
fn the_same_value_is_shared_not_a_conflict() {
    let live = json!({"spec": {"parent": "p"}});
    let managed = vec![entry("kubectl-edit", Operation::Update, json!({"f:spec": {"f:parent": {}}}))];
    // `false` is what an omitted allowCascadingDeletion means.
    let config = json!({"spec": {"parent": "p", "allowCascadingDeletion": false}});
    let out = apply(&SHAPE, &live, &managed, &config, "flux", false, NOW).unwrap();
    assert!(owned_by(&out.managed, "kubectl-edit").is_some());
    assert_eq!(
        owned_by(&out.managed, "flux").unwrap().fields.to_fields_v1(),
        json!({"f:spec": {"f:parent": {}, "f:allowCascadingDeletion": {}}})
    );
}

#[test]
fn force_takes_conflicting_fields_over() {
    let live = json!({"spec": {"parent": "p"}, "metadata": {"labels": {"x": "1"}}});
    let managed = vec![entry(
        "kubectl-edit",
        Operation::Update,
        json!({"f:spec": {"f:parent": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}),
    )];
    let out = apply(&SHAPE, &live, &managed, &json!({"spec": {"parent": "q"}}), "flux", true, NOW).unwrap();
    assert_eq!(out.object["spec"]["parent"], "q");
    assert_eq!(
        owned_by(&out.managed, "kubectl-edit").unwrap().fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:x": {}}}})
    );
    assert_eq!(
        owned_by(&out.managed, "flux").unwrap().fields.to_fields_v1(),
        json!({"f:spec": {"f:parent": {}}})
    );
}

#[test]
fn fields_no_longer_applied_are_removed_unless_someone_else_owns_them() {
    let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"parent": "p"}});
    let managed = vec![
        entry(
            "flux",
            Operation::Apply,
            json!({"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}}, "f:spec": {"f:parent": {}}}),
        ),
        entry("kubectl-label", Operation::Update, json!({"f:metadata": {"f:labels": {"f:b": {}}}})),
    ];
    let out =
        apply(&SHAPE, &live, &managed, &json!({"spec": {"parent": "p"}}), "flux", false, LATER).unwrap();
    assert_eq!(out.object["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(out.object["spec"]["parent"], "p");
    let flux = owned_by(&out.managed, "flux").unwrap();
    assert_eq!(flux.fields.to_fields_v1(), json!({"f:spec": {"f:parent": {}}}));
    assert_eq!(flux.time.as_deref(), Some(LATER));
}

#[test]
fn applying_again_unchanged_keeps_the_entry_time() {
    let live = json!({"spec": {"parent": "p"}});
    let managed = vec![entry("flux", Operation::Apply, json!({"f:spec": {"f:parent": {}}}))];
    let out =
        apply(&SHAPE, &live, &managed, &json!({"spec": {"parent": "p"}}), "flux", false, LATER).unwrap();
    assert_eq!(out.managed, managed);
    assert_eq!(out.object, live);
}

#[test]
fn two_managers_on_different_fields_both_keep_theirs() {
    let live = json!({"metadata": {"name": "hierarchy"}});
    let flux =
        apply(&SHAPE, &live, &[], &json!({"spec": {"allowCascadingDeletion": true}}), "flux", false, NOW)
            .unwrap();
    let mut labelled = flux.object.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    let managed = update(&SHAPE, &flux.object, &labelled, &flux.managed, "kubectl-label", LATER);
    assert_eq!(
        owned_by(&managed, "flux").unwrap().fields.to_fields_v1(),
        json!({"f:spec": {"f:allowCascadingDeletion": {}}})
    );
    assert_eq!(
        owned_by(&managed, "kubectl-label").unwrap().fields.to_fields_v1(),
        json!({"f:metadata": {"f:labels": {"f:team": {}}}})
    );
    // flux applies again: the label is not its to remove.
    let again = apply(
        &SHAPE,
        &labelled,
        &managed,
        &json!({"spec": {"allowCascadingDeletion": true}}),
        "flux",
        false,
        LATER,
    )
    .unwrap();
    assert_eq!(again.object, labelled);
    assert_eq!(again.managed, managed);
}

#[test]
fn associative_list_items_merge_by_key() {
    let live = json!({"spec": {"labels": [{"key": "env", "value": "prod"}, {"key": "tier", "value": "1"}]}});
    let managed = vec![entry(
        "kubectl-edit",
        Operation::Update,
        json!({"f:spec": {"f:labels": {
            "k:{\"key\":\"env\"}": {".": {}, "f:key": {}, "f:value": {}},
            "k:{\"key\":\"tier\"}": {".": {}, "f:key": {}, "f:value": {}}}}}),
    )];
    let config = json!({"spec": {"labels": [{"key": "team", "value": "a"}, {"key": "tier", "value": "1"}]}});
    let out = apply(&SHAPE, &live, &managed, &config, "flux", false, NOW).unwrap();
    assert_eq!(
        out.object["spec"]["labels"],
        json!([{"key": "env", "value": "prod"}, {"key": "tier", "value": "1"}, {"key": "team", "value": "a"}])
    );
    let conflict = json!({"spec": {"labels": [{"key": "env", "value": "dev"}]}});
    let err = apply(&SHAPE, &live, &managed, &conflict, "flux", false, NOW).unwrap_err();
    assert_eq!(err.0[0].field, r#".spec.labels[key="env"].value"#);
    // Dropping an item flux alone applied removes it.
    let out2 = apply(
        &SHAPE,
        &out.object,
        &out.managed,
        &json!({"spec": {"labels": [{"key": "tier", "value": "1"}]}}),
        "flux",
        false,
        NOW,
    )
    .unwrap();
    assert_eq!(
        out2.object["spec"]["labels"],
        json!([{"key": "env", "value": "prod"}, {"key": "tier", "value": "1"}])
    );
}

#[test]
fn multi_key_lists_use_every_key() {
    let live = json!({"spec": {"resources": [{"resource": "secrets", "mode": "Propagate"}]}});
    let config = json!({"spec": {"resources": [{"group": "", "resource": "secrets", "mode": "Remove"},
                                                {"group": "apps", "resource": "secrets"}]}});
    let out = apply(&SHAPE, &live, &[], &config, "flux", true, NOW).unwrap();
    assert_eq!(
        out.object["spec"]["resources"],
        json!([{"resource": "secrets", "mode": "Remove", "group": ""}, {"group": "apps", "resource": "secrets"}])
    );
    // The fields that were there before the first apply belonged to someone.
    assert_eq!(
        owned_by(&out.managed, BEFORE_FIRST_APPLY).unwrap().fields.to_fields_v1(),
        json!({"f:spec": {"f:resources": {"k:{\"group\":\"\",\"resource\":\"secrets\"}": {".": {}, "f:resource": {}}}}}),
        "the mode was forced away"
    );
    let err = apply(&SHAPE, &live, &[], &config, "flux", false, NOW).unwrap_err();
    assert_eq!(err.0[0].manager, "\"before-first-apply\" using hnc.x-k8s.io/v1alpha2");
}

#[test]
fn updates_transfer_changed_fields_and_drop_removed_ones() {
    let old =
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"parent": "p", "allowCascadingDeletion": true}});
    let managed = vec![
        entry("flux", Operation::Apply, json!({"f:spec": {"f:parent": {}, "f:allowCascadingDeletion": {}}})),
        entry("kubectl-label", Operation::Update, json!({"f:metadata": {"f:labels": {"f:a": {}}}})),
    ];
    let new = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"parent": "q"}});
    let out = update(&SHAPE, &old, &new, &managed, "kubectl-edit", LATER);
    assert_eq!(out.len(), 2, "flux lost everything: {out:?}");
    assert_eq!(out[0].manager, "kubectl-label");
    assert_eq!(out[0].time.as_deref(), Some(NOW), "an entry losing fields keeps its time");
    assert_eq!(out[1].manager, "kubectl-edit");
    assert_eq!(out[1].fields.to_fields_v1(), json!({"f:spec": {"f:parent": {}}}));
    // Removing the label empties and drops kubectl-label's entry.
    let unlabelled = json!({"spec": {"parent": "q"}});
    let out = update(&SHAPE, &new, &unlabelled, &out, "kubectl-edit", LATER);
    assert_eq!(out.len(), 1);
    // A write that changes nothing changes no entry.
    assert_eq!(update(&SHAPE, &unlabelled, &unlabelled, &out, "other", LATER), out);
}

#[test]
fn entries_convert_to_and_from_managed_fields() {
    let e = entry("flux", Operation::Apply, json!({"f:spec": {"f:parent": {}}}));
    let k = e.to_k8s();
    assert_eq!(k.api_version.as_deref(), Some("hnc.x-k8s.io/v1alpha2"));
    assert_eq!(k.operation.as_deref(), Some("Apply"));
    assert_eq!(serde_json::to_value(&k).unwrap()["time"], NOW);
    assert_eq!(from_k8s(std::slice::from_ref(&k)).unwrap(), vec![e.clone()]);
    assert!(from_k8s(&[k.clone(), k.clone()]).is_err(), "duplicate manager");
    let mut bad = k.clone();
    bad.operation = Some("Patch".into());
    assert!(from_k8s(&[bad]).is_err());
    // The stored form is compact: no apiVersion or fieldsType.
    let stored = serde_json::to_value(&e).unwrap();
    assert_eq!(
        stored,
        json!({"manager": "flux", "operation": "Apply", "time": NOW, "fields": {"f:spec": {"f:parent": {}}}})
    );
    assert_eq!(serde_json::from_value::<Entry>(stored).unwrap(), e);
}
