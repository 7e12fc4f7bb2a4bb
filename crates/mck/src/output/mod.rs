//! How `mck consume` writes records: one line per record, and an output that counts
//! the bytes it has written so a checkpoint can record the file's length.

mod fields;
mod json;
mod layout;
mod render;
mod sink;

pub use json::JsonParts;
pub use layout::{Format, Layout};
pub use render::{append_with, render, render_file};
pub use sink::{FileStart, Output, WriteError, sync_parent};
