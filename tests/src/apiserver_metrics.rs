//! kube-apiserver's own metrics (its `/metrics`, Prometheus text), read as a client allowed to.

use kube::Client;

/// kube-apiserver's metrics, as text.
pub async fn kube_apiserver_metrics(client: &Client) -> anyhow::Result<String> {
    Ok(client.request_text(http::Request::get("/metrics").body(Vec::new())?).await?)
}

/// The sum of every sample of metric `name` in Prometheus text `text`, of those with label
/// `key="value"` if given.
pub fn metric_sum(text: &str, name: &str, label: Option<(&str, &str)>) -> f64 {
    let wanted = label.map(|(k, v)| format!("{k}=\"{v}\""));
    text.lines()
        .filter(|line| {
            line.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && wanted.as_ref().is_none_or(|w| line.contains(w.as_str()))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sums_add_the_samples_of_one_metric_only() {
        let text = "# HELP apiserver_request_total x\n\
            apiserver_request_total{verb=\"GET\",code=\"200\"} 3\n\
            apiserver_request_total{verb=\"WATCH\",code=\"200\"} 2\n\
            apiserver_request_total_other 100\n\
            apiserver_longrunning_requests{verb=\"WATCH\"} 7\n";
        assert_eq!(metric_sum(text, "apiserver_request_total", None), 5.0);
        assert_eq!(metric_sum(text, "apiserver_request_total", Some(("verb", "WATCH"))), 2.0);
        assert_eq!(metric_sum(text, "apiserver_longrunning_requests", Some(("verb", "WATCH"))), 7.0);
    }
}
