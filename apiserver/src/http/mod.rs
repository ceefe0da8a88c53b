//! HTTP and Kubernetes API conventions, with no knowledge of hns's resources: `Status` errors,
//! request parsing, content negotiation, selectors, bodies and patches, list pagination.

pub mod body;
pub mod list;
pub mod negotiation;
pub mod patch;
pub mod request_info;
pub mod selector;
pub mod status;
pub mod table;
