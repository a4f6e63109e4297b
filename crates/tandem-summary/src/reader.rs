//! Reading event files back: for tests (tandem's reproducibility checks
//! compare scalars of two runs) and for tools that inspect a run directory.

use std::io;
use std::path::{Path, PathBuf};

use prost::Message;

use crate::proto::{Event, event, summary};
use crate::record::split_records;

/// The events of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct EventFile {
    /// Every complete event, in file order, the file-version record included.
    pub events: Vec<Event>,
    /// Bytes after the last complete record (a writer killed mid-record, or
    /// one still writing). Zero for a cleanly written file.
    pub incomplete_tail: usize,
}

/// One scalar point.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarPoint {
    pub tag: String,
    pub step: i64,
    pub value: f32,
}

/// Reads and decodes every complete record of an event file. A trailing
/// partial record is tolerated and counted; a CRC mismatch or an undecodable
/// record is an `InvalidData` error naming the file and the byte offset.
pub fn read_event_file(path: &Path) -> io::Result<EventFile> {
    let bytes = std::fs::read(path).map_err(|error| {
        io::Error::new(error.kind(), format!("reading {}: {error}", path.display()))
    })?;
    let invalid = |message: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("event file {}: {message}", path.display()),
        )
    };
    let records = split_records(&bytes).map_err(|corrupt| invalid(corrupt.to_string()))?;
    let mut events = Vec::with_capacity(records.payloads.len());
    for (index, payload) in records.payloads.iter().enumerate() {
        let event = Event::decode(*payload)
            .map_err(|error| invalid(format!("record {index} is not an Event: {error}")))?;
        events.push(event);
    }
    Ok(EventFile {
        events,
        incomplete_tail: records.incomplete_tail,
    })
}

/// The event files (names containing `tfevents`, as TensorBoard selects them)
/// directly inside `log_dir`, sorted by name, which orders them by creation time.
pub fn event_files(log_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(log_dir).map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("listing {}: {error}", log_dir.display()),
        )
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().contains("tfevents") && entry.file_type()?.is_file()
        {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Every scalar (`simple_value`) in `events`, in file order.
pub fn scalars(events: &[Event]) -> Vec<ScalarPoint> {
    let mut points = Vec::new();
    for event in events {
        let Some(event::What::Summary(summary)) = &event.what else {
            continue;
        };
        for value in &summary.value {
            if let Some(summary::value::Kind::SimpleValue(scalar)) = value.kind {
                points.push(ScalarPoint {
                    tag: value.tag.clone(),
                    step: event.step,
                    value: scalar,
                });
            }
        }
    }
    points
}
