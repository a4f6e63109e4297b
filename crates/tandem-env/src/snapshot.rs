//! The binary encoding of environment snapshots: the [`Persist`] trait that games and
//! wrappers use to write and read their state field by field, named length-prefixed
//! sections that let a reader say *which* part of a chain does not fit, and the
//! checksum that guards a whole snapshot against corruption.
//!
//! Everything is little-endian; `usize` is stored as `u64`; floats as their bit
//! patterns, so a restored state is bit-identical. A section is its tag (a string),
//! the byte length of its body (`u64`), and the body; a reader checks the tag, reads
//! the body from exactly that many bytes and requires all of them to be used, so a
//! snapshot of a differently built environment is refused by name instead of being
//! misread. The container format of a whole [`crate::VecEnv`] snapshot (header,
//! version, checksum) is described in [`crate::vec_env`].

use crate::EnvError;

/// The error for a snapshot that cannot be restored.
pub fn snapshot_error(message: impl Into<String>) -> EnvError {
    EnvError::Snapshot(message.into())
}

/// Takes `count` bytes off the front of `input`, or says what was being read when the
/// input ran out.
pub fn take<'a>(input: &mut &'a [u8], count: usize, what: &str) -> Result<&'a [u8], EnvError> {
    if input.len() < count {
        return Err(snapshot_error(format!(
            "truncated: {what} needs {count} bytes, only {} remain",
            input.len()
        )));
    }
    let (head, tail) = input.split_at(count);
    *input = tail;
    Ok(head)
}

/// A value that can write itself to a snapshot and read itself back in place.
///
/// Reading in place (rather than constructing) lets a value check what it reads against
/// how it was built, e.g. that a frame buffer has the length this chain needs.
pub trait Persist {
    fn save(&self, out: &mut Vec<u8>);
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError>;

    /// Writes many values; numbers override it to write frame buffers in bulk.
    fn save_all(values: &[Self], out: &mut Vec<u8>)
    where
        Self: Sized,
    {
        values.iter().for_each(|v| v.save(out));
    }

    /// Reads many values in place (the counterpart of [`Persist::save_all`]).
    fn load_all(values: &mut [Self], input: &mut &[u8]) -> Result<(), EnvError>
    where
        Self: Sized,
    {
        values.iter_mut().try_for_each(|v| v.load(input))
    }
}

macro_rules! persist_le_bytes {
    ($($t:ty),*) => {$(
        impl Persist for $t {
            fn save(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
                let bytes = take(input, std::mem::size_of::<$t>(), stringify!($t))?;
                *self = <$t>::from_le_bytes(bytes.try_into().expect("length checked"));
                Ok(())
            }
            // Fixed-size chunks let the compiler turn these loops into plain copies.
            fn save_all(values: &[Self], out: &mut Vec<u8>) {
                const SIZE: usize = std::mem::size_of::<$t>();
                let start = out.len();
                out.resize(start + values.len() * SIZE, 0);
                for (chunk, v) in out[start..].chunks_exact_mut(SIZE).zip(values) {
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
            }
            fn load_all(values: &mut [Self], input: &mut &[u8]) -> Result<(), EnvError> {
                const SIZE: usize = std::mem::size_of::<$t>();
                let bytes = take(input, values.len() * SIZE, stringify!($t))?;
                for (chunk, v) in bytes.chunks_exact(SIZE).zip(values) {
                    *v = <$t>::from_le_bytes(chunk.try_into().expect("chunk size"));
                }
                Ok(())
            }
        }
    )*};
}
persist_le_bytes!(u8, u16, u32, u64, u128, i32, i64);

impl Persist for usize {
    fn save(&self, out: &mut Vec<u8>) {
        (*self as u64).save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let mut wide = 0u64;
        wide.load(input)?;
        *self = usize::try_from(wide)
            .map_err(|_| snapshot_error(format!("size {wide} does not fit this machine")))?;
        Ok(())
    }
}

impl Persist for f32 {
    fn save(&self, out: &mut Vec<u8>) {
        self.to_bits().save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let mut bits = 0u32;
        bits.load(input)?;
        *self = f32::from_bits(bits);
        Ok(())
    }
    fn save_all(values: &[Self], out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + values.len() * 4, 0);
        for (chunk, v) in out[start..].chunks_exact_mut(4).zip(values) {
            chunk.copy_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    fn load_all(values: &mut [Self], input: &mut &[u8]) -> Result<(), EnvError> {
        let bytes = take(input, values.len() * 4, "f32")?;
        for (chunk, v) in bytes.chunks_exact(4).zip(values) {
            *v = f32::from_bits(u32::from_le_bytes(chunk.try_into().expect("chunk size")));
        }
        Ok(())
    }
}

impl Persist for f64 {
    fn save(&self, out: &mut Vec<u8>) {
        self.to_bits().save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let mut bits = 0u64;
        bits.load(input)?;
        *self = f64::from_bits(bits);
        Ok(())
    }
}

impl Persist for bool {
    fn save(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        *self = match take(input, 1, "bool")?[0] {
            0 => false,
            1 => true,
            other => return Err(snapshot_error(format!("corrupt: flag byte {other}"))),
        };
        Ok(())
    }
}

impl<T: Persist, const N: usize> Persist for [T; N] {
    fn save(&self, out: &mut Vec<u8>) {
        T::save_all(self, out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        T::load_all(self, input)
    }
}

impl<T: Persist + ?Sized> Persist for Box<T> {
    fn save(&self, out: &mut Vec<u8>) {
        (**self).save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        (**self).load(input)
    }
}

impl<A: Persist, B: Persist> Persist for (A, B) {
    fn save(&self, out: &mut Vec<u8>) {
        self.0.save(out);
        self.1.save(out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        self.0.load(input)?;
        self.1.load(input)
    }
}

impl<T: Persist + Default> Persist for Option<T> {
    fn save(&self, out: &mut Vec<u8>) {
        self.is_some().save(out);
        if let Some(value) = self {
            value.save(out);
        }
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let mut present = false;
        present.load(input)?;
        *self = if present {
            let mut value = T::default();
            value.load(input)?;
            Some(value)
        } else {
            None
        };
        Ok(())
    }
}

/// Reads a collection length, refusing lengths the remaining input cannot hold (every
/// element takes at least one byte), so corrupt input never triggers a huge allocation.
fn load_len(input: &mut &[u8]) -> Result<usize, EnvError> {
    let mut len = 0usize;
    len.load(input)?;
    if len > input.len() {
        return Err(snapshot_error(format!(
            "truncated: a list of {len} elements, only {} bytes remain",
            input.len()
        )));
    }
    Ok(len)
}

/// Variable-length lists (e.g. the bullets on a MinAtar screen).
impl<T: Persist + Default> Persist for Vec<T> {
    fn save(&self, out: &mut Vec<u8>) {
        self.len().save(out);
        T::save_all(self, out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let len = load_len(input)?;
        self.clear();
        self.resize_with(len, T::default);
        T::load_all(self, input)
    }
}

impl Persist for String {
    fn save(&self, out: &mut Vec<u8>) {
        self.len().save(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        let len = load_len(input)?;
        let bytes = take(input, len, "string")?;
        *self = String::from_utf8(bytes.to_vec())
            .map_err(|_| snapshot_error("corrupt: a name is not UTF-8"))?;
        Ok(())
    }
}

/// Slices have the length the environment was built with: restoring checks it.
impl<T: Persist> Persist for [T] {
    fn save(&self, out: &mut Vec<u8>) {
        save_buffer(self, out);
    }
    fn load(&mut self, input: &mut &[u8]) -> Result<(), EnvError> {
        load_buffer(self, "a buffer", input)
    }
}

/// Writes a buffer whose length is fixed by how the environment was built.
pub fn save_buffer<T: Persist>(values: &[T], out: &mut Vec<u8>) {
    values.len().save(out);
    T::save_all(values, out);
}

/// Reads a buffer written by [`save_buffer`] into `values`, which must have the stored
/// length (otherwise the snapshot is of a differently built environment).
pub fn load_buffer<T: Persist>(
    values: &mut [T],
    what: &str,
    input: &mut &[u8],
) -> Result<(), EnvError> {
    let mut len = 0usize;
    len.load(input)?;
    if len != values.len() {
        return Err(snapshot_error(format!(
            "{what} holds {len} values in the snapshot, {} in this environment",
            values.len()
        )));
    }
    T::load_all(values, input)
}

/// Writes a build parameter so that [`expect_same`] can refuse a differently
/// configured environment.
pub fn save_param<T: Persist>(value: &T, out: &mut Vec<u8>) {
    value.save(out);
}

/// Reads a parameter written by [`save_param`] and checks it equals this environment's.
pub fn expect_same<T: Persist + Default + PartialEq + std::fmt::Debug>(
    current: &T,
    what: &str,
    input: &mut &[u8],
) -> Result<(), EnvError> {
    let mut stored = T::default();
    stored.load(input)?;
    if &stored != current {
        return Err(snapshot_error(format!(
            "{what} is {stored:?} in the snapshot, {current:?} in this environment"
        )));
    }
    Ok(())
}

/// Writes a section: `tag`, the body's length, then the body `write` produces.
pub fn save_section(
    out: &mut Vec<u8>,
    tag: &str,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), EnvError>,
) -> Result<(), EnvError> {
    tag.to_owned().save(out);
    let len_at = out.len();
    0u64.save(out);
    write(out)?;
    let body_len = (out.len() - len_at - 8) as u64;
    out[len_at..len_at + 8].copy_from_slice(&body_len.to_le_bytes());
    Ok(())
}

/// Reads a section written by [`save_section`] under the same `tag`; `read` must
/// consume its body exactly. Errors from inside are prefixed with the tag, so nested
/// sections name the path to the part that failed.
pub fn load_section(
    input: &mut &[u8],
    tag: &str,
    read: impl FnOnce(&mut &[u8]) -> Result<(), EnvError>,
) -> Result<(), EnvError> {
    let mut stored = String::new();
    stored.load(input)?;
    if stored != tag {
        return Err(snapshot_error(format!(
            "the snapshot holds the state of `{stored}` where this environment has `{tag}`"
        )));
    }
    let mut body_len = 0usize;
    body_len.load(input)?;
    let mut body = take(input, body_len, tag)?;
    let within = |error: EnvError| match error {
        EnvError::Snapshot(message) => snapshot_error(format!("{tag}: {message}")),
        other => other,
    };
    read(&mut body).map_err(within)?;
    if !body.is_empty() {
        return Err(snapshot_error(format!(
            "{tag}: {} bytes of its state were left unread (a snapshot of a different build?)",
            body.len()
        )));
    }
    Ok(())
}

/// CRC-32 (IEEE): catches accidental corruption of a snapshot (every burst of up to 32
/// flipped bits, and all but 2^-32 of other damage); not an authenticity check. A
/// byte-at-a-time hash cost more than the whole rest of a MinAtar snapshot.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Implements [`Persist`] for a struct by its listed fields, in order.
macro_rules! persist_fields {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        impl $crate::snapshot::Persist for $ty {
            fn save(&self, out: &mut Vec<u8>) {
                $( $crate::snapshot::Persist::save(&self.$field, out); )*
            }
            fn load(&mut self, input: &mut &[u8]) -> Result<(), $crate::EnvError> {
                $( $crate::snapshot::Persist::load(&mut self.$field, input)?; )*
                Ok(())
            }
        }
    };
}
pub(crate) use persist_fields;

/// The snapshot methods of a game's [`crate::Env`] impl: one section tagged with the
/// game's name holding its build parameters (checked on restore) and its state fields.
macro_rules! game_snapshot_methods {
    ($tag:literal, params: [$($param:ident),* $(,)?], state: [$($field:ident),* $(,)?]) => {
        fn chain_names(&self, names: &mut Vec<String>) {
            names.push($tag.to_owned());
        }
        fn save_state(&self, out: &mut Vec<u8>) -> Result<(), $crate::EnvError> {
            $crate::snapshot::save_section(out, $tag, |out| {
                $( $crate::snapshot::save_param(&self.$param, out); )*
                $( $crate::snapshot::Persist::save(&self.$field, out); )*
                Ok(())
            })
        }
        fn load_state(&mut self, input: &mut &[u8]) -> Result<(), $crate::EnvError> {
            $crate::snapshot::load_section(input, $tag, |input| {
                $( $crate::snapshot::expect_same(&self.$param, stringify!($param), input)?; )*
                $( $crate::snapshot::Persist::load(&mut self.$field, input)?; )*
                Ok(())
            })
        }
    };
}
pub(crate) use game_snapshot_methods;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_bit_exactly() {
        let mut out = Vec::new();
        let original = ((f32::NAN, -0.0f64), (vec![Some(3u16), None], [true, false]));
        original.save(&mut out);
        "tag".to_owned().save(&mut out);
        let mut back = ((0f32, 0f64), (Vec::<Option<u16>>::new(), [false; 2]));
        let mut input = &out[..];
        back.load(&mut input).unwrap();
        assert_eq!(back.0.0.to_bits(), f32::NAN.to_bits());
        assert_eq!(back.0.1.to_bits(), (-0.0f64).to_bits());
        assert_eq!(back.1, original.1);
        let mut tag = String::new();
        tag.load(&mut input).unwrap();
        assert_eq!(tag, "tag");
        assert!(input.is_empty());
    }

    #[test]
    fn truncated_and_corrupt_input_is_an_error_not_a_panic() {
        let mut out = Vec::new();
        vec![1u32, 2, 3].save(&mut out);
        let mut short = &out[..out.len() - 1];
        let err = Vec::<u32>::new().load(&mut short).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
        // A huge length prefix is refused before allocating.
        let mut huge = &u64::MAX.to_le_bytes()[..];
        assert!(Vec::<u8>::new().load(&mut huge).is_err());
        let mut bad_flag = &[7u8][..];
        let err = false.load(&mut bad_flag).unwrap_err();
        assert!(err.to_string().contains("flag byte 7"), "{err}");
    }

    #[test]
    fn sections_check_their_tag_and_length() {
        let mut out = Vec::new();
        save_section(&mut out, "outer", |out| {
            5u32.save(out);
            Ok(())
        })
        .unwrap();
        let mut input = &out[..];
        let err = load_section(&mut input, "other", |_| Ok(())).unwrap_err();
        assert!(
            err.to_string()
                .contains("`outer` where this environment has `other`"),
            "{err}"
        );
        let mut input = &out[..];
        let err = load_section(&mut input, "outer", |_| Ok(())).unwrap_err();
        assert!(
            err.to_string()
                .contains("4 bytes of its state were left unread"),
            "{err}"
        );
        let mut input = &out[..];
        let err = load_section(&mut input, "outer", |input| {
            let mut wide = 0u64;
            wide.load(input)
        })
        .unwrap_err();
        assert!(
            err.to_string().starts_with("snapshot: outer: truncated"),
            "{err}"
        );
        let mut input = &out[..];
        let mut value = 0u32;
        load_section(&mut input, "outer", |input| value.load(input)).unwrap();
        assert_eq!(value, 5);
    }
}
