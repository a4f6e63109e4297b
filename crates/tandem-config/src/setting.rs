//! One declaration per config section: the [`settings!`] macro turns a list of settings, each a
//! Rust field with its schema row (name, type and range, default, meaning), into the typed
//! struct the rest of tandem reads, the schema's rows the resolver checks and prints, and the
//! conversions between the struct and the flat value map. [`choices!`] does the same for a
//! setting that takes one of a few names. This module also owns the schema's row types
//! ([`Ty`], [`Dflt`], [`Field`], [`Kind`]) and the checked value ([`Val`]), so that it sits
//! below both the model and the schema.

/// The type (and allowed range) of one setting.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ty {
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        min_open: bool,
        max: f64,
        max_open: bool,
    },
    Bool,
    Choice(&'static [&'static str]),
    IntList {
        min: i64,
        max: i64,
    },
    Name,
    /// Any non-empty string without control characters.
    Text,
    /// Zero or more Python module names (`ale_py`, `my_envs.registry`).
    Modules,
    /// Zero or more distinct keys of a gymnasium environment's `info` dict: non-empty strings
    /// without control characters.
    InfoKeys,
    Devices,
    Threads,
    Wrappers,
    /// A block of layers, a residual holding a block of its own ([`tandem_spec::Layer`]).
    Layers,
    /// A block of `name value` keyword arguments.
    Args,
    /// A block of `name "pattern"`: each policy and the agent ids it plays (held as
    /// [`Val::Args`] of strings).
    Policies,
    /// A block of `section.setting RULE`: the hyperparameters population-based training
    /// explores and how ([`Explore`]).
    Explore,
    /// The string given (`"auto"`: the learner decides), or a value of the inner type.
    OrWord(&'static str, &'static Ty),
}

/// `env.envs`'s default for ppo and a2c ([`Dflt::Envs`]).
pub(crate) const ENVS_ON_POLICY: usize = 8;

/// The gymnasium game's `workers` where a rank has that many environments or more
/// ([`Dflt::Workers`]).
pub(crate) const GYM_WORKERS: usize = 2;

/// The default of one setting, written out explicitly in the resolved form.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dflt {
    Required,
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'static str),
    IntList(&'static [i64]),
    Devices,
    Auto,
    NoWrappers,
    /// An empty list of strings (no modules, no info keys).
    NoStrings,
    /// An empty block of keyword arguments.
    NoArgs,
    /// `network.actor-critic`'s: it depends on the learner and the network, see
    /// `schema::actor_critic_default`.
    ActorCritic,
    /// `env.envs`'s: 8, or one per rank for the off-policy learners, see `schema::envs_default`.
    Envs,
    /// The gymnasium game's `workers`: 2, or the rank's environments where fewer (each worker
    /// steps at least one).
    Workers,
    /// A network setting whose default is `box_actor` for the learners that act through a
    /// squashed box actor (sac, td3: the algorithm table's `Acts::SquashedBox`) and `usual` for
    /// the others: their networks start as CleanRL's and Stable-Baselines3's do
    /// (docs/defaults.md). The resolver picks by the experiment's algorithm
    /// ([`Dflt::for_learner`]).
    Learner {
        usual: &'static Dflt,
        box_actor: &'static Dflt,
    },
}

impl Dflt {
    /// The plain default a derived one stands for where nothing decides it (no algorithm, no
    /// devices yet): what a setting starts as before the resolver rewrites it, and what a
    /// one-line example shows. Plain defaults are themselves.
    pub(crate) fn usual(&self) -> Dflt {
        match *self {
            Dflt::ActorCritic => Dflt::Str("shared"),
            Dflt::Envs => Dflt::Int(ENVS_ON_POLICY as i64),
            Dflt::Workers => Dflt::Int(GYM_WORKERS as i64),
            Dflt::Learner { usual, .. } => *usual,
            plain => plain,
        }
    }

    /// This default for an experiment whose learner does (`box_actor`) or does not act through
    /// a squashed box actor.
    pub(crate) fn for_learner(&self, box_actor: bool) -> &Dflt {
        match self {
            Dflt::Learner {
                box_actor: dflt, ..
            } if box_actor => dflt,
            Dflt::Learner { usual, .. } => usual,
            other => other,
        }
    }
}

/// One setting's schema row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub nullable: bool,
    pub default: Dflt,
    pub doc: &'static str,
}

/// One kind a section can take (`algorithm "ppo"`) and its own settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    pub name: &'static str,
    pub doc: &'static str,
    pub fields: &'static [Field],
}

pub(crate) const POSITIVE: Ty = Ty::Float {
    min: 0.0,
    min_open: true,
    max: f64::INFINITY,
    max_open: true,
};
pub(crate) const NON_NEGATIVE: Ty = Ty::Float {
    min: 0.0,
    min_open: false,
    max: f64::INFINITY,
    max_open: true,
};
pub(crate) const UNIT_OPEN_CLOSED: Ty = Ty::Float {
    min: 0.0,
    min_open: true,
    max: 1.0,
    max_open: false,
};
pub(crate) const UNIT_CLOSED: Ty = Ty::Float {
    min: 0.0,
    min_open: false,
    max: 1.0,
    max_open: false,
};
pub(crate) const UNIT_OPEN: Ty = Ty::Float {
    min: 0.0,
    min_open: true,
    max: 1.0,
    max_open: true,
};
pub(crate) const ANY_FLOAT: Ty = Ty::Float {
    min: f64::NEG_INFINITY,
    min_open: true,
    max: f64::INFINITY,
    max_open: true,
};
pub(crate) const COUNT: Ty = Ty::Int {
    min: 1,
    max: i64::MAX,
};
pub(crate) const ZERO_OR_MORE: Ty = Ty::Int {
    min: 0,
    max: i64::MAX,
};
pub(crate) const SECONDS: Ty = Ty::Float {
    min: 0.0,
    min_open: true,
    max: 86_400.0,
    max_open: false,
};

/// A checked value of one setting (or of a section's kind, stored as `Str`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Null,
    IntList(Vec<i64>),
    Devices(Vec<crate::devices::Device>),
    Threads(crate::devices::Threads),
    Wrappers(Vec<tandem_spec::Wrapper>),
    Layers(Vec<tandem_spec::Layer>),
    /// A list of strings, in order: what they name is the setting's type's (`Ty::Modules`,
    /// `Ty::InfoKeys`).
    Strings(Vec<String>),
    /// Keyword arguments, sorted by name.
    Args(Vec<(String, tandem_spec::game::Scalar)>),
    /// `train.policies`, sorted by name.
    Policies(Vec<Policy>),
    /// `population.explore`, sorted by path.
    Explore(Vec<Explore>),
}

/// One policy of `train.policies` (kept here, with the values, as the model's `PolicyMap`
/// holds them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Policy {
    pub name: String,
    /// The agent ids it plays, `*` matching any run of characters.
    pub pattern: String,
    /// Its own values of the `algorithm` and `network` sections' settings, by path: each a
    /// path (`algorithm.lr`) and the value as canonical KDL arguments (`0.001`), as `--set`
    /// takes them (`Experiment::for_policy`).
    pub settings: Vec<(String, String)>,
}

/// One hyperparameter population-based training explores (`population.explore`): a number
/// setting of the algorithm section, how an exploiting member perturbs it, and whether the
/// members start spread over its values or all from the experiment's.
#[derive(Debug, Clone, PartialEq)]
pub struct Explore {
    /// The setting's path, `algorithm.<name>`.
    pub path: String,
    pub rule: ExploreRule,
    /// Whether each member starts from a value drawn from the rule's range or list (seeded),
    /// rather than the experiment's own.
    pub spread: bool,
}

/// How a hyperparameter moves when a member explores.
#[derive(Debug, Clone, PartialEq)]
pub enum ExploreRule {
    /// Multiplied or divided by `factor` (each with probability 1/2), kept within
    /// `[min, max]`; a spread start draws log-uniformly from that range.
    Factor { factor: f64, min: f64, max: f64 },
    /// One of these values, ascending: a step to a neighbour (up or down with probability
    /// 1/2, staying put at an end it cannot pass); a spread start draws uniformly among them.
    Values(Vec<f64>),
}

impl Val {
    pub fn from_default(d: &Dflt) -> Option<Val> {
        Some(match *d {
            Dflt::Required => return None,
            Dflt::Null => Val::Null,
            Dflt::Int(i) => Val::Int(i),
            Dflt::Float(x) => Val::Float(x),
            Dflt::Bool(b) => Val::Bool(b),
            Dflt::Str(s) => Val::Str(s.to_string()),
            Dflt::IntList(l) => Val::IntList(l.to_vec()),
            Dflt::Devices => Val::Devices(vec![crate::devices::Device::Cpu]),
            Dflt::Auto => Val::Threads(crate::devices::Threads::Auto),
            Dflt::NoWrappers => Val::Wrappers(Vec::new()),
            Dflt::NoStrings => Val::Strings(Vec::new()),
            Dflt::NoArgs => Val::Args(Vec::new()),
            // Rewritten by the resolver once the settings they derive from are known
            // (`for_learner`, and `derive_defaults` in resolve/apply.rs).
            Dflt::ActorCritic | Dflt::Envs | Dflt::Workers | Dflt::Learner { .. } => {
                return Val::from_default(&d.usual());
            }
        })
    }
}

/// A Rust type a setting is read into. The resolver has checked every value against the schema
/// before it is read, so a mismatch is a bug; reads fall back to zero-like values rather than
/// panicking, and the round-trip tests of `values.rs` guard against such bugs.
pub(crate) trait Setting: Sized {
    /// Whether the setting may be `#null`: exactly the `Option` types.
    const NULLABLE: bool = false;
    fn from_val(val: Option<&Val>) -> Self;
    fn to_val(&self) -> Val;
}

impl Setting for f64 {
    fn from_val(val: Option<&Val>) -> f64 {
        match val {
            Some(Val::Float(x)) => *x,
            _ => 0.0,
        }
    }
    fn to_val(&self) -> Val {
        Val::Float(*self)
    }
}

impl Setting for bool {
    fn from_val(val: Option<&Val>) -> bool {
        matches!(val, Some(Val::Bool(true)))
    }
    fn to_val(&self) -> Val {
        Val::Bool(*self)
    }
}

/// Counts: negative values (which the schema never lets through) read as 0.
macro_rules! count_setting {
    ($($t:ty),*) => {$(
        impl Setting for $t {
            fn from_val(val: Option<&Val>) -> $t {
                match val {
                    Some(Val::Int(i)) => <$t>::try_from(*i).unwrap_or(0),
                    _ => 0,
                }
            }
            fn to_val(&self) -> Val {
                Val::Int(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
count_setting!(u64, usize, u32);

impl Setting for Vec<usize> {
    fn from_val(val: Option<&Val>) -> Vec<usize> {
        match val {
            Some(Val::IntList(l)) => l.iter().map(|i| usize::try_from(*i).unwrap_or(0)).collect(),
            _ => Vec::new(),
        }
    }
    fn to_val(&self) -> Val {
        Val::IntList(
            self.iter()
                .map(|i| i64::try_from(*i).unwrap_or(i64::MAX))
                .collect(),
        )
    }
}

/// The setting types that may be `#null` when wrapped in an `Option` (a choice's `Option`,
/// `network.core`, reads "none" instead).
pub(crate) trait Nullable: Setting {}
impl Nullable for f64 {}
impl Nullable for u64 {}
impl Nullable for String {}

impl Setting for Vec<crate::devices::Device> {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Devices(d)) => d.clone(),
            _ => vec![crate::devices::Device::Cpu],
        }
    }
    fn to_val(&self) -> Val {
        Val::Devices(self.clone())
    }
}

impl Setting for crate::devices::Threads {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Threads(t)) => *t,
            _ => crate::devices::Threads::Auto,
        }
    }
    fn to_val(&self) -> Val {
        Val::Threads(*self)
    }
}

impl<T: Nullable> Setting for Option<T> {
    const NULLABLE: bool = true;
    fn from_val(val: Option<&Val>) -> Option<T> {
        match val {
            None | Some(Val::Null) => None,
            some => Some(T::from_val(some)),
        }
    }
    fn to_val(&self) -> Val {
        self.as_ref().map_or(Val::Null, T::to_val)
    }
}

impl Setting for String {
    fn from_val(val: Option<&Val>) -> String {
        match val {
            Some(Val::Str(s)) => s.clone(),
            _ => String::new(),
        }
    }
    fn to_val(&self) -> Val {
        Val::Str(self.clone())
    }
}

impl Setting for Vec<tandem_spec::Wrapper> {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Wrappers(w)) => w.clone(),
            _ => Vec::new(),
        }
    }
    fn to_val(&self) -> Val {
        Val::Wrappers(self.clone())
    }
}

impl Setting for Vec<tandem_spec::Layer> {
    fn from_val(val: Option<&Val>) -> Self {
        match val {
            Some(Val::Layers(list)) => list.clone(),
            _ => Vec::new(),
        }
    }
    fn to_val(&self) -> Val {
        Val::Layers(self.clone())
    }
}

/// Reads one section's settings from a complete value map.
pub(crate) struct Reader<'a> {
    pub values: &'a std::collections::BTreeMap<String, Val>,
    /// The section's name; empty for the settings directly inside `experiment`.
    pub prefix: &'static str,
}

impl Reader<'_> {
    pub fn get(&self, field: &str) -> Option<&Val> {
        self.values.get(&path(self.prefix, field))
    }
    pub fn read<T: Setting>(&self, field: &str) -> T {
        T::from_val(self.get(field))
    }
    /// The section's kind (`ppo` for `algorithm "ppo"`).
    pub fn kind(&self) -> &str {
        match self.values.get(self.prefix) {
            Some(Val::Str(s)) => s,
            _ => "",
        }
    }
}

/// Inserts one section's settings into a value map.
pub(crate) struct Writer<'a> {
    pub values: &'a mut std::collections::BTreeMap<String, Val>,
    pub prefix: &'static str,
}

impl<'a> Writer<'a> {
    pub fn new(
        values: &'a mut std::collections::BTreeMap<String, Val>,
        prefix: &'static str,
    ) -> Self {
        Writer { values, prefix }
    }
    pub fn put(&mut self, field: &str, val: Val) {
        self.values.insert(path(self.prefix, field), val);
    }
    pub fn write<T: Setting>(&mut self, field: &str, value: &T) {
        self.put(field, value.to_val());
    }
    pub fn kind(&mut self, kind: &str) {
        self.values
            .insert(self.prefix.to_string(), Val::Str(kind.to_string()));
    }
}

fn path(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

/// Declares a struct of settings once: each field is written
/// `rust_name: Type = "user-name", range, default, "meaning";` and becomes
/// - a public field of the struct, documented with the meaning;
/// - a schema row ([`Field`]) in `FIELDS`, nullable exactly when the type is an `Option`;
/// - a read in `read` and a write in `write`, under the user's name.
///
/// With `as "kind", "meaning"` after the name, the struct is also that kind of its section
/// (`KIND`, a [`Kind`] row). A plain struct's `Default` gives the schema's defaults. A section whose kinds
/// carry settings of their own starts with `kind field: Type;`, a [`SectionKind`] read and
/// written before the common settings. The experiment itself starts with
/// `sections { field: Type = "name"; ... }`, each read and written under its name after the
/// settings that follow.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            sections { $( $section:ident : $section_ty:ty = $prefix:literal; )* }
            $( $field:ident : $ty:ty = $key:literal, $range:expr, $default:expr, $doc:literal; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( #[doc = $doc] pub $field: $ty, )*
            $( #[doc = concat!("The `", $prefix, "` section.")] pub $section: $section_ty, )*
        }

        impl $name {
            $crate::setting::settings!(@rows $( $field: $ty = $key, $range, $default, $doc; )*);

            /// The settings and every section from a complete, checked value map.
            pub(crate) fn read(r: &$crate::setting::Reader) -> Self {
                Self {
                    $( $field: r.read($key), )*
                    $( $section: <$section_ty>::read(&$crate::setting::Reader {
                        values: r.values,
                        prefix: $prefix,
                    }), )*
                }
            }

            /// Writes every setting and every section into a value map.
            pub(crate) fn write(&self, w: &mut $crate::setting::Writer) {
                $( w.write($key, &self.$field); )*
                $( self.$section.write(&mut $crate::setting::Writer::new(&mut *w.values, $prefix)); )*
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            kind $kind_field:ident : $kind_ty:ty;
            $( $field:ident : $ty:ty = $key:literal, $range:expr, $default:expr, $doc:literal; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            pub $kind_field: $kind_ty,
            $( #[doc = $doc] pub $field: $ty, )*
        }

        impl $name {
            $crate::setting::settings!(@rows $( $field: $ty = $key, $range, $default, $doc; )*);

            /// The section from a complete, checked value map.
            pub(crate) fn read(r: &$crate::setting::Reader) -> Self {
                Self {
                    $kind_field: $crate::setting::SectionKind::read(r),
                    $( $field: r.read($key), )*
                }
            }

            /// Writes the section's kind and every setting into a value map.
            pub(crate) fn write(&self, w: &mut $crate::setting::Writer) {
                $crate::setting::SectionKind::write(&self.$kind_field, w);
                $( w.write($key, &self.$field); )*
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(as $kind:literal, $kind_doc:literal)? {
            $( $field:ident : $ty:ty = $key:literal, $range:expr, $default:expr, $doc:literal; )*
        }
    ) => {
        $(#[$meta])*
        $(#[doc = $kind_doc])?
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( #[doc = $doc] pub $field: $ty, )*
        }

        impl $name {
            $crate::setting::settings!(@rows $( $field: $ty = $key, $range, $default, $doc; )*);

            $(
            /// The schema's row of this kind of its section.
            pub(crate) const KIND: $crate::setting::Kind = $crate::setting::Kind {
                name: $kind,
                doc: $kind_doc,
                fields: Self::FIELDS,
            };
            )?

            /// The settings from a complete, checked value map.
            pub(crate) fn read(r: &$crate::setting::Reader) -> Self {
                Self { $( $field: r.read($key), )* }
            }

            /// Writes every setting into a value map.
            pub(crate) fn write(&self, w: &mut $crate::setting::Writer) {
                $( w.write($key, &self.$field); )*
            }
        }

        impl Default for $name {
            /// The schema's defaults.
            fn default() -> Self {
                Self { $( $field: <$ty as $crate::setting::Setting>::from_val(
                    $crate::setting::Val::from_default(&$default).as_ref()), )* }
            }
        }
    };
    (@field $ty:ty = $key:literal, $range:expr, $default:expr, $doc:literal) => {
        $crate::setting::Field {
            name: $key,
            ty: $range,
            nullable: <$ty as $crate::setting::Setting>::NULLABLE,
            default: $default,
            doc: $doc,
        }
    };
    (@rows $( $field:ident : $ty:ty = $key:literal, $range:expr, $default:expr, $doc:literal; )*) => {
        /// The schema's rows of these settings, in canonical order.
        pub(crate) const FIELDS: &'static [$crate::setting::Field] = &[$(
            $crate::setting::settings!(@field $ty = $key, $range, $default, $doc),
        )*];

        /// The Rust names of the fields, in the order of `FIELDS` (for the test that each is
        /// its user name with `_` for `-`).
        #[cfg(test)]
        pub(crate) const RUST_NAMES: &'static [&'static str] = &[$(stringify!($field)),*];
    };
}
pub(crate) use settings;

/// Declares the kinds a section can take once, when each kind's own settings are few: an enum
/// whose variants are written `Variant = "name", "meaning" { field: Type = "user-name", range,
/// default, "meaning"; ... }` (a kind without settings leaves out the braces and is a unit
/// variant). It gives the enum, `name`, the schema's rows (`KINDS`) and the [`SectionKind`]
/// read and write, so the kind's settings are named once. The first kind is what a value the
/// schema never lets through reads as.
macro_rules! kinds {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $variant:ident = $kind:literal, $kind_doc:literal $({
                    $( $field:ident : $ty:ty = $key:literal, $range:expr, $default:expr, $doc:literal; )*
                })?
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $(
                #[doc = $kind_doc]
                $variant $({ $( #[doc = $doc] $field: $ty, )* })?,
            )+
        }

        impl $name {
            /// The schema's rows of the kinds, in the order the reference lists them.
            pub(crate) const KINDS: &'static [$crate::setting::Kind] = &[$(
                $crate::setting::Kind {
                    name: $kind,
                    doc: $kind_doc,
                    fields: &[$($(
                        $crate::setting::settings!(@field $ty = $key, $range, $default, $doc),
                    )*)?],
                },
            )+];

            /// The kind's name, as the user writes it.
            pub fn name(&self) -> &'static str {
                match self {
                    $( $name::$variant { .. } => $kind, )+
                }
            }
        }

        impl $crate::setting::SectionKind for $name {
            fn read(r: &$crate::setting::Reader) -> Self {
                let kind = r.kind();
                $(
                    if kind == $kind {
                        return $name::$variant $({ $( $field: r.read($key), )* })?;
                    }
                )+
                $crate::setting::kinds!(@first r, $name, $($variant $({ $( $field = $key ),* })?),+)
            }

            #[allow(unused_variables)]
            fn write(&self, w: &mut $crate::setting::Writer) {
                w.kind(self.name());
                match self {
                    $(
                        $name::$variant $({ $( $field ),* })? => {
                            $($( w.write($key, $field); )*)?
                        }
                    )+
                }
            }
        }
    };
    (@first $r:ident, $name:ident, $variant:ident $({ $( $field:ident = $key:literal ),* })? $(, $($rest:tt)*)?) => {
        $name::$variant $({ $( $field: $r.read($key), )* })?
    };
}
pub(crate) use kinds;

/// Declares the algorithm table once: an enum whose variants are written
/// `Variant(Section) = facts;`, each `Section` a struct of settings declared `as "kind"` (its
/// `KIND` row names it). It gives the enum, `name`, `facts`, the schema's rows (`KINDS`), the
/// facts by name for the schema's derived defaults (`facts_of`), and the [`SectionKind`] read
/// and write, so no list of algorithms is written anywhere else: a new learner is a new row,
/// and every `match` over the enum that the compiler then finds non-exhaustive. The first row
/// is the section's default kind, and what a kind the schema never lets through reads as.
macro_rules! algorithms {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $variant:ident($section:ident) = $facts:expr; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $variant($section), )+
        }

        impl $name {
            /// The schema's rows of the kinds, in the table's order.
            pub(crate) const KINDS: &'static [$crate::setting::Kind] = &[$( $section::KIND, )+];

            /// Every algorithm's name with its facts, in the table's order.
            pub const TABLE: &'static [(&'static str, AlgorithmFacts)] =
                &[$( ($section::KIND.name, $facts), )+];

            /// The kind's name, as its declaration gives it.
            pub fn name(&self) -> &'static str {
                match self {
                    $( $name::$variant(_) => $section::KIND.name, )+
                }
            }

            /// What the table says of this algorithm.
            pub fn facts(&self) -> AlgorithmFacts {
                match self {
                    $( $name::$variant(_) => $facts, )+
                }
            }
        }

        impl $crate::setting::SectionKind for $name {
            fn read(r: &$crate::setting::Reader) -> Self {
                let kind = r.kind();
                $(
                    if kind == $section::KIND.name {
                        return $name::$variant($section::read(r));
                    }
                )+
                $crate::setting::algorithms!(@first r, $name, $($variant($section))+)
            }

            fn write(&self, w: &mut $crate::setting::Writer) {
                w.kind(self.name());
                match self {
                    $( $name::$variant(section) => section.write(w), )+
                }
            }
        }
    };
    (@first $r:ident, $name:ident, $variant:ident($section:ident) $($rest:tt)*) => {
        $name::$variant($section::read($r))
    };
}
pub(crate) use algorithms;

/// The kind a section takes (`sync "periodic"`) with the settings only that kind has, read
/// from and written to the section's value map.
pub(crate) trait SectionKind: Sized {
    fn read(r: &Reader) -> Self;
    fn write(&self, w: &mut Writer);
}

/// Declares a setting's choices once: an enum whose variants are written `Variant = "name"`, the
/// list of names for the schema (`NAMES`, in the order given; the first is what a value the
/// schema never lets through reads as) and the conversions.
macro_rules! choices {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $key:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $( $(#[$vmeta])* $variant, )+ }

        impl $name {
            /// Every choice's name, as the user writes it.
            pub(crate) const NAMES: &'static [&'static str] = &[$($key),+];

            /// The name the user writes.
            pub fn name(self) -> &'static str {
                match self { $( $name::$variant => $key, )+ }
            }
        }

        impl $crate::setting::Setting for $name {
            fn from_val(val: Option<&$crate::setting::Val>) -> Self {
                let text = match val {
                    Some($crate::setting::Val::Str(s)) => s.as_str(),
                    _ => "",
                };
                [$($name::$variant),+]
                    .into_iter()
                    .find(|choice| choice.name() == text)
                    .unwrap_or([$($name::$variant),+][0])
            }
            fn to_val(&self) -> $crate::setting::Val {
                $crate::setting::Val::Str(self.name().to_string())
            }
        }
    };
}
pub(crate) use choices;
