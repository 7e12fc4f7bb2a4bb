//! Record batches of the source as Arrow record batches, exported to Python through
//! the Arrow C data interface (pyo3-arrow gives pyarrow the arrays' C structs).
//!
//! Keys and values are `binary_view` columns laid over the bytes as fetched: a view
//! array's values may lie anywhere in its buffers, so the batch's own buffers (and
//! the fetch answers its large values are shared from) become the column's buffers
//! as they are, without a copy. Values of 12 bytes or fewer are inlined in their
//! views, as Arrow's layout wants.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, ListBuilder, StringBuilder, StructBuilder, make_view};
use arrow_array::types::TimestampMillisecondType;
use arrow_array::{
    ArrayRef, BinaryViewArray, Int32Array, Int64Array, PrimitiveArray, StringViewArray,
};
use arrow_buffer::{Buffer, NullBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use multicluster_kafka::record::RecordBatch;
use pyo3::prelude::*;

use crate::stream::Stream;

/// The columns of a batch, in order.
pub(crate) fn schema() -> SchemaRef {
    static SCHEMA: std::sync::OnceLock<SchemaRef> = std::sync::OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Arc::new(Schema::new(vec![
                Field::new("stream", DataType::Utf8View, true),
                Field::new("cluster", DataType::Utf8View, false),
                Field::new("topic", DataType::Utf8View, false),
                Field::new("partition", DataType::Int32, false),
                Field::new("offset", DataType::Int64, false),
                Field::new(
                    "timestamp",
                    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                    true,
                ),
                Field::new("key", DataType::BinaryView, true),
                Field::new("value", DataType::BinaryView, true),
                Field::new("headers", headers_type(), false),
            ]))
        })
        .clone()
}

fn header_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Binary, true),
    ])
}

fn headers_type() -> DataType {
    DataType::List(Arc::new(Field::new(
        "item",
        DataType::Struct(header_fields()),
        false,
    )))
}

/// A batch of the source as an Arrow record batch sharing its bytes.
pub(crate) fn to_arrow<V>(batch: &RecordBatch<V>) -> arrow_array::RecordBatch {
    let n = batch.len();
    let buffers: Vec<Buffer> = batch
        .byte_buffers()
        .map(|b| Buffer::from(b.clone()))
        .collect();
    let mut keys = Vec::with_capacity(n);
    let mut values = Vec::with_capacity(n);
    let mut partitions = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    let mut timestamps = Vec::with_capacity(n);
    let mut has_timestamp = Vec::with_capacity(n);
    let mut names = Names::default();
    let (mut streams, mut clusters, mut topics) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut headers = ListBuilder::new(StructBuilder::new(
        header_fields(),
        vec![
            Box::new(StringBuilder::new()) as Box<dyn arrow_array::builder::ArrayBuilder>,
            Box::new(BinaryBuilder::new()),
        ],
    ))
    .with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(header_fields()),
        false,
    )));
    let view = |span: Option<(usize, std::ops::Range<usize>)>| match span {
        Some((i, range)) => {
            let bytes = &buffers[i].as_slice()[range.clone()];
            make_view(bytes, i as u32, range.start as u32)
        }
        None => 0,
    };
    for (i, record) in batch.iter().enumerate() {
        let key = batch.key_span(i);
        keys.push((key.is_some(), view(key)));
        let value = batch.value_span(i);
        values.push((value.is_some(), view(value)));
        partitions.push(record.partition);
        offsets.push(record.offset);
        timestamps.push(record.timestamp.unwrap_or(0));
        has_timestamp.push(record.timestamp.is_some());
        streams.push(record.streams.first().map(|s| names.view(s)));
        clusters.push(Some(names.view(record.cluster)));
        topics.push(Some(names.view(record.topic)));
        for (name, value) in record.headers {
            let entry = headers.values();
            entry
                .field_builder::<StringBuilder>(0)
                .expect("the key builder")
                .append_value(name);
            entry
                .field_builder::<BinaryBuilder>(1)
                .expect("the value builder")
                .append_option(value.as_deref());
            entry.append(true);
        }
        headers.append(true);
    }
    let binary = |views: Vec<(bool, u128)>| -> ArrayRef {
        let nulls = NullBuffer::from(views.iter().map(|v| v.0).collect::<Vec<bool>>());
        let views = ScalarBuffer::from(views.into_iter().map(|v| v.1).collect::<Vec<u128>>());
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        Arc::new(BinaryViewArray::new(views, buffers.clone(), nulls))
    };
    let timestamp = PrimitiveArray::<TimestampMillisecondType>::new(
        ScalarBuffer::from(timestamps),
        Some(NullBuffer::from(has_timestamp)).filter(|n| n.null_count() > 0),
    )
    .with_timezone("UTC");
    let columns: Vec<ArrayRef> = vec![
        names.array(streams),
        names.array(clusters),
        names.array(topics),
        Arc::new(Int32Array::from(partitions)),
        Arc::new(Int64Array::from(offsets)),
        Arc::new(timestamp),
        binary(keys),
        binary(values),
        Arc::new(headers.finish()),
    ];
    arrow_array::RecordBatch::try_new(schema(), columns).expect("the columns match the schema")
}

/// The few names of a batch (streams, cluster, topics), each written once into one
/// buffer and repeated by view.
#[derive(Default)]
struct Names {
    data: Vec<u8>,
    seen: Vec<(*const u8, usize, u128)>,
}

impl Names {
    fn view(&mut self, name: &Arc<str>) -> u128 {
        let key = (name.as_ptr(), name.len());
        if let Some(&(_, _, v)) = self.seen.iter().find(|(p, l, _)| (*p, *l) == key) {
            return v;
        }
        let v = make_view(name.as_bytes(), 0, self.data.len() as u32);
        self.data.extend_from_slice(name.as_bytes());
        self.seen.push((key.0, key.1, v));
        v
    }

    fn array(&self, views: Vec<Option<u128>>) -> ArrayRef {
        let nulls = NullBuffer::from(views.iter().map(Option::is_some).collect::<Vec<bool>>());
        let views = ScalarBuffer::from(
            views
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect::<Vec<u128>>(),
        );
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        Arc::new(StringViewArray::new(
            views,
            vec![Buffer::from(self.data.clone())],
            nulls,
        ))
    }
}

/// `Stream.batches()`: the stream's records as `pyarrow.RecordBatch`es of at most
/// `max_records` rows, each from one cluster; ends where the stream ends.
#[pyclass(module = "multicluster_kafka")]
pub struct Batches {
    pub(crate) stream: Py<Stream>,
    pub(crate) max_records: usize,
}

#[pymethods]
impl Batches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let stream = self.stream.bind(py).borrow();
        let Some(batch) = stream.next_batch(py, self.max_records)? else {
            return Ok(None);
        };
        let batch = to_arrow(&batch);
        Ok(Some(
            pyo3_arrow::PyRecordBatch::new(batch)
                .into_pyarrow(py)?
                .unbind(),
        ))
    }
}
