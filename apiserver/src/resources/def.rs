//! What a resource is: its names, its Table columns, its schemas, and the handlers of the verbs
//! it serves, as k8s.io/apiserver's storages implement `Getter`, `Lister`, `Creater`… A resource
//! module fills in one [`ResourceDef`]; a field left out does not compile, and a verb without a
//! handler is neither listed nor routed. A handler gets the [`Call`] and answers a [`Reply`].

use std::collections::HashMap;

use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::item::Item;
use crate::auth::authn::Identity;
use crate::auth::view::View;
use crate::hierarchy::forest::Forest;
use crate::hierarchy::identity::Derived;
use crate::hierarchy::policy::Policy;
use crate::http::request_info::{ResourceRequest, Verb};
use crate::http::status::{ApiError, GroupResource};
use crate::http::table::{Column, RenderOptions};
use crate::state::{AppState, Context};
use crate::store::config_store::ConfigStore;

/// Serves one verb of one resource.
pub type Handler = for<'a> fn(&'a Call<'a>) -> LocalBoxFuture<'a, Result<Reply, ApiError>>;

/// The objects of a resource in one namespace (for a cluster-scoped resource, given `""`: all of
/// them) as they stand in the forest, in key order: what lists show and a watch from the current
/// state starts with. Lists across namespaces ask namespace after namespace
/// ([`super::listing::objects`]), so that no answer is built whole.
pub type CurrentObjects = fn(&Reads<'_>, &Forest, &ResourceDef, &str) -> Vec<Item>;

/// What [`CurrentObjects`] reads beside the forest: the settings that decide how an object
/// shows, and the HNC configuration (its one object).
pub struct Reads<'a> {
    /// The administrator's settings.
    pub policy: &'a Policy,
    /// The HNC configuration.
    pub config: &'a ConfigStore,
}

impl<'a> Context<'a> for Reads<'a> {
    fn of(state: &'a AppState) -> Self {
        Reads { policy: &state.policy, config: &state.config }
    }
}

/// How a resource serves `list`.
#[derive(Clone, Copy)]
pub enum List {
    /// From the objects it holds now, as its watch starts ([`super::listing::list`]): pages,
    /// selectors, views and streaming come with it.
    Current(CurrentObjects),
    /// By a handler of its own.
    Handler(Handler),
}

/// The verbs a resource serves, each with its handler; `None` is not served.
pub struct Handlers {
    /// `get`: one object.
    pub get: Option<Handler>,
    /// `list`: a collection.
    pub list: Option<List>,
    /// `watch`: served by [`super::watch`] from the objects it starts with and the events of
    /// [`ResourceDef::derived`].
    pub watch: Option<CurrentObjects>,
    /// `create` (POST).
    pub create: Option<Handler>,
    /// `update` (PUT).
    pub update: Option<Handler>,
    /// `patch`: JSON, merge and server-side apply patches.
    pub patch: Option<Handler>,
    /// `delete` of one object.
    pub delete: Option<Handler>,
    /// `deletecollection`.
    pub delete_collection: Option<Handler>,
}

impl Handlers {
    /// Nothing served: a resource names the verbs it serves and takes the rest from here
    /// (`..Handlers::NONE`).
    pub const NONE: Handlers = Handlers {
        get: None,
        list: None,
        watch: None,
        create: None,
        update: None,
        patch: None,
        delete: None,
        delete_collection: None,
    };

    /// The handler of `verb` (a list from the current objects and a watch are not plain
    /// handlers: see [`Handlers::list`] and [`Handlers::watch`]).
    pub fn handler(&self, verb: Verb) -> Option<Handler> {
        match verb {
            Verb::Get => self.get,
            Verb::List => match self.list {
                Some(List::Handler(handler)) => Some(handler),
                Some(List::Current(_)) | None => None,
            },
            Verb::Watch => None,
            Verb::Create => self.create,
            Verb::Update => self.update,
            Verb::Patch => self.patch,
            Verb::Delete => self.delete,
            Verb::DeleteCollection => self.delete_collection,
        }
    }

    /// Whether `verb` is served.
    pub fn serves(&self, verb: Verb) -> bool {
        match verb {
            Verb::Watch => self.watch.is_some(),
            Verb::List => self.list.is_some(),
            verb => self.handler(verb).is_some(),
        }
    }
}

/// How one resource is served.
pub struct ResourceDef {
    /// Plural name, the URL segment (`hierarchyconfigurations`).
    pub plural: &'static str,
    /// Kind of its objects; the singular name and the list's kind follow from it.
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// What it serves, verb by verb: discovery, OpenAPI and routing all read this, so a verb is
    /// listed exactly when it has a handler (controllers act on what discovery lists).
    pub handlers: Handlers,
    /// Whether an object's name is a namespace's (a subnamespace is its own namespace), so a
    /// request for one object first makes sure the cache has seen that namespace.
    pub name_is_namespace: bool,
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Table columns, `Name` first.
    pub columns: &'static [Column],
    /// Table cells of an object, one per column.
    pub cells: fn(&Item, jiff::Timestamp) -> Vec<Value>,
    /// What the kind is, for `kubectl explain`.
    pub description: &'static str,
    /// The kind of derived objects its watch follows.
    pub derived: Derived,
    /// Schemas of `spec` and `status` (OpenAPI), registered in the generator's definitions.
    pub schemas: fn(&mut schemars::SchemaGenerator) -> (schemars::Schema, Option<schemars::Schema>),
}

impl ResourceDef {
    /// `resource.group`, for error messages.
    pub fn group_resource(&self) -> GroupResource<'static> {
        GroupResource { group: hns_api::GROUP, resource: self.plural }
    }

    /// Singular name, as Kubernetes makes it: the kind in lower case (`hierarchyconfiguration`).
    pub fn singular(&self) -> String {
        self.kind.to_ascii_lowercase()
    }

    /// Kind of its lists (`HierarchyConfigurationList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether `verb` is served.
    pub fn supports(&self, verb: Verb) -> bool {
        self.handlers.serves(verb)
    }

    /// The verbs served, in discovery's order.
    pub fn verbs(&self) -> Vec<&'static str> {
        Verb::ALL.into_iter().filter(|v| self.supports(*v)).map(Verb::as_str).collect()
    }
}

/// The server's state as a resource module holds it: only through a [`Context`] of its own.
#[derive(Clone, Copy)]
pub struct Shared<'a>(&'a AppState);

impl<'a> Shared<'a> {
    /// `state`, reachable from here on only through contexts.
    pub fn new(state: &'a AppState) -> Self {
        Shared(state)
    }
}

/// One API call, as the resource modules see it.
pub struct Call<'a> {
    /// The server's state, behind the resource's narrow [`Context`] ([`Call::context`]).
    pub state: Shared<'a>,
    /// The caller.
    pub who: &'a Identity,
    /// What is asked.
    pub req: &'a ResourceRequest,
    /// The resource asked for.
    pub def: &'static ResourceDef,
    /// Query parameters.
    pub query: &'a HashMap<String, String>,
    /// How to render objects.
    pub render: &'a RenderOptions,
    /// The request body (empty for reads).
    pub body: &'a [u8],
    /// Its `Content-Type`.
    pub content_type: Option<&'a str>,
    /// The client's `User-Agent`, which names the manager of writes without `fieldManager`.
    pub user_agent: Option<&'a str>,
    /// For a list the user may not make across all namespaces: what they may see of it.
    pub view: Option<View>,
}

impl<'a> Call<'a> {
    /// The parts of the server's state that `C` holds.
    pub fn context<C: Context<'a>>(&self) -> C {
        C::of(self.state.0)
    }
}

/// A body written a piece at a time, as it is rendered.
pub type Streamed = futures::stream::LocalBoxStream<'static, Result<bytes::Bytes, actix_web::Error>>;

/// The body of a [`Reply`].
pub enum Body {
    /// One JSON document, rendered.
    Json(Value),
    /// JSON rendered while it is sent: lists across namespaces, whose size grows with the
    /// cluster's.
    Streamed(Streamed),
}

/// What a resource module answers.
pub struct Reply {
    /// HTTP status (200, 201).
    pub code: u16,
    /// The body.
    pub body: Body,
    /// `Warning` headers (e.g. unknown fields).
    pub warnings: Vec<String>,
}

impl Reply {
    /// 200 with `body`.
    pub fn ok(body: Value) -> Self {
        Reply::json(200, body, Vec::new())
    }

    /// `code` with `body` and `warnings`.
    pub fn json(code: u16, body: Value, warnings: Vec<String>) -> Self {
        Reply { code, body: Body::Json(body), warnings }
    }

    /// 200 with a body rendered while it is sent.
    pub fn streamed(body: Streamed) -> Self {
        Reply { code: 200, body: Body::Streamed(body), warnings: Vec::new() }
    }
}
