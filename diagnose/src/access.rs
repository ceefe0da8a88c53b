//! Which rights a remedy needs that the current user lacks, asked with
//! SelfSubjectAccessReviews (which every authenticated user may create), so a fix is refused
//! up front with the missing rights named instead of failing half-way.

use std::collections::{BTreeSet, HashMap};

use futures::{stream, StreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::causes::Diagnosis;
use super::remedy::{Remedy, Right};

const CONCURRENCY: usize = 16;

/// Fills in `missing_rights` of every remedy in the diagnosis.
pub async fn check_diagnosis(client: &Client, diagnosis: &mut Diagnosis) {
    let rights: BTreeSet<Right> = diagnosis
        .remedies_mut()
        .flat_map(|r| r.actions.iter().map(|a| a.right()).collect::<Vec<_>>())
        .collect();
    let answers = ask(client, rights).await;
    for remedy in diagnosis.remedies_mut() {
        remedy.missing_rights = missing(remedy, &answers);
    }
}

/// Fills in `missing_rights` of one remedy.
pub async fn check_remedy(client: &Client, remedy: &mut Remedy) {
    let rights: BTreeSet<Right> = remedy.actions.iter().map(|a| a.right()).collect();
    let answers = ask(client, rights).await;
    remedy.missing_rights = missing(remedy, &answers);
}

fn missing(remedy: &Remedy, answers: &HashMap<Right, bool>) -> Vec<String> {
    let lacking: BTreeSet<String> = remedy
        .actions
        .iter()
        .map(|a| a.right())
        .filter(|r| answers.get(r) == Some(&false))
        .map(|r| r.to_string())
        .collect();
    lacking.into_iter().collect()
}

/// Asks the API server about each right. A right whose review fails is left out: the write
/// itself will then say whether it is allowed.
async fn ask(client: &Client, rights: BTreeSet<Right>) -> HashMap<Right, bool> {
    stream::iter(rights)
        .map(|right| async move {
            let allowed = review(client, &right).await;
            allowed.map(|a| (right, a))
        })
        .buffer_unordered(CONCURRENCY)
        .filter_map(|r| async move { r })
        .collect()
        .await
}

async fn review(client: &Client, right: &Right) -> Option<bool> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(right.verb.to_string()),
                group: Some(right.group.clone()),
                resource: Some(right.resource.clone()),
                subresource: right.subresource.map(str::to_string),
                namespace: right.namespace.clone(),
                name: Some(right.name.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = api.create(&PostParams::default(), &review).await.ok()?;
    answer.status.map(|s| s.allowed)
}
