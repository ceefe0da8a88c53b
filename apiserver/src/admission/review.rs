//! What a webhook handler takes: the AdmissionReview's request, decoded, and who sent it.

use actix_web::dev::Payload;
use actix_web::error::InternalError;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest, HttpResponse};
use futures::future::LocalBoxFuture;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde::de::DeserializeOwned;

use crate::auth::authn::ClusterPeer;

/// An AdmissionReview's request, as an actix extractor. A body that is not JSON is answered
/// with a Status ([`crate::server::app`]'s JSON error); a review without a request is answered
/// as kube-apiserver expects, with an AdmissionReview that refuses it as invalid.
pub struct Review<T: kube::Resource> {
    /// What kube-apiserver asks about.
    pub request: AdmissionRequest<T>,
    /// Whether the caller holds a certificate of the cluster's (kube-apiserver, when its
    /// admission configuration gives it one; see [`crate::server`]). kube-apiserver calls
    /// webhooks without one otherwise, so anyone who reaches the port may ask: only such a
    /// caller is told about, or may have hns act on, more than the review itself carries.
    pub cluster_peer: bool,
}

impl<T> FromRequest for Review<T>
where
    T: kube::Resource + DeserializeOwned + 'static,
{
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(http: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let cluster_peer = http.extensions().get::<ClusterPeer>().is_some_and(|p| p.0);
        let body = web::Json::<AdmissionReview<T>>::from_request(http, payload);
        Box::pin(async move {
            let review = body.await?.into_inner();
            let request: AdmissionRequest<T> = review.try_into().map_err(|e| {
                let answer = invalid(&e);
                InternalError::from_response(e, answer)
            })?;
            Ok(Review { request, cluster_peer })
        })
    }
}

/// The answer to a review that could not be decoded.
pub fn invalid(error: impl std::fmt::Display) -> HttpResponse {
    HttpResponse::Ok().json(AdmissionResponse::invalid(error.to_string()).into_review())
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;
    use k8s_openapi::api::core::v1::Namespace;
    use serde_json::{json, Value};

    use super::*;

    async fn extract(body: Value, cluster_peer: bool) -> Result<Review<Namespace>, actix_web::Error> {
        let (http, mut payload) = TestRequest::post().set_json(body).to_http_parts();
        http.extensions_mut().insert(ClusterPeer(cluster_peer));
        Review::<Namespace>::from_request(&http, &mut payload).await
    }

    fn review(request: Option<Value>) -> Value {
        let mut review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
        if let Some(request) = request {
            review["request"] = request;
        }
        review
    }

    #[actix_web::test]
    async fn a_review_is_decoded_with_whether_the_cluster_sent_it() {
        let request = json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "name": "team-a", "operation": "CREATE", "userInfo": {"username": "alice"},
        });
        for peer in [false, true] {
            let review = extract(review(Some(request.clone())), peer).await.unwrap();
            assert_eq!((review.request.name.as_str(), review.cluster_peer), ("team-a", peer));
        }
    }

    #[actix_web::test]
    async fn a_review_without_a_request_is_answered_as_invalid() {
        let refused = extract(review(None), true).await.err().unwrap().error_response();
        assert_eq!(refused.status(), 200, "kube-apiserver reads the AdmissionReview it gets");
        let body = actix_web::body::to_bytes(refused.into_body()).await.unwrap();
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
    }
}
