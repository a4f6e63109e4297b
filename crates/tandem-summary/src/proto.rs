//! The TensorBoard protocol-buffer messages that tandem writes and reads back,
//! derived by hand with `prost` from the published `event.proto`,
//! `summary.proto`, `tensor.proto` and `tensor_shape.proto` field numbers.
//!
//! Only the fields tandem uses are declared; prost skips unknown fields when
//! decoding, so files written by other tools still decode.

/// One record of an event file (`tensorboard.Event`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "event::What", tags = "3, 5")]
    pub what: Option<event::What>,
}

pub mod event {
    /// The payload of an [`Event`](super::Event).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum What {
        /// The first record of every file: `"brain.Event:2"`.
        #[prost(string, tag = "3")]
        FileVersion(String),
        #[prost(message, tag = "5")]
        Summary(super::Summary),
    }
}

/// `tensorboard.Summary`: the values logged at one step.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<summary::Value>,
}

pub mod summary {
    /// `tensorboard.Summary.Value`: one tagged value.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Value {
        #[prost(string, tag = "1")]
        pub tag: String,
        #[prost(message, optional, tag = "9")]
        pub metadata: Option<super::SummaryMetadata>,
        #[prost(oneof = "value::Kind", tags = "2, 4, 5, 8")]
        pub kind: Option<value::Kind>,
    }

    pub mod value {
        /// Which kind of data a [`Value`](super::Value) holds.
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Kind {
            #[prost(float, tag = "2")]
            SimpleValue(f32),
            #[prost(message, tag = "4")]
            Image(super::Image),
            #[prost(message, tag = "5")]
            Histo(super::super::HistogramProto),
            #[prost(message, tag = "8")]
            Tensor(super::super::TensorProto),
        }
    }

    /// `tensorboard.Summary.Image`: an encoded (here always PNG) image.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Image {
        #[prost(int32, tag = "1")]
        pub height: i32,
        #[prost(int32, tag = "2")]
        pub width: i32,
        /// 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA.
        #[prost(int32, tag = "3")]
        pub colorspace: i32,
        #[prost(bytes = "vec", tag = "4")]
        pub encoded_image_string: Vec<u8>,
    }
}

/// `tensorboard.HistogramProto`. Bucket `i` covers
/// `[bucket_limit[i-1], bucket_limit[i])`; TensorBoard uses `min` as the left
/// edge of the first non-empty bucket and `max` as the right edge of the last.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HistogramProto {
    #[prost(double, tag = "1")]
    pub min: f64,
    #[prost(double, tag = "2")]
    pub max: f64,
    #[prost(double, tag = "3")]
    pub num: f64,
    #[prost(double, tag = "4")]
    pub sum: f64,
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}

/// `tensorboard.SummaryMetadata`: tells TensorBoard which plugin owns a value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    pub plugin_data: Option<PluginData>,
    #[prost(string, tag = "2")]
    pub display_name: String,
    #[prost(string, tag = "3")]
    pub summary_description: String,
    #[prost(enumeration = "DataClass", tag = "4")]
    pub data_class: i32,
}

/// `tensorboard.SummaryMetadata.PluginData`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginData {
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    #[prost(bytes = "vec", tag = "2")]
    pub content: Vec<u8>,
}

/// `tensorboard.DataClass`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum DataClass {
    Unknown = 0,
    Scalar = 1,
    Tensor = 2,
    BlobSequence = 3,
}

/// `tensorboard.TensorProto`, reduced to what string tensors need.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// A `tensorboard.DataType`; see [`DT_STRING`].
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
}

/// `tensorboard.DataType.DT_STRING`.
pub const DT_STRING: i32 = 7;

/// `tensorboard.TensorShapeProto`; no dimensions means a scalar.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<tensor_shape_proto::Dim>,
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

pub mod tensor_shape_proto {
    /// One dimension of a [`TensorShapeProto`](super::TensorShapeProto).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dim {
        #[prost(int64, tag = "1")]
        pub size: i64,
        #[prost(string, tag = "2")]
        pub name: String,
    }
}
