//! A line's timestamp field, found without decoding the rest of the JSON line.

use super::*;

/// Checks that `line` is one JSON object and returns its `field` as milliseconds.
pub(super) fn timestamp_of(line: &[u8], field: &str) -> Result<i64, String> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let found = FindTimestamp(field)
        .deserialize(&mut de)
        .map_err(|e| format!("not a JSON object: {e}"))?;
    de.end().map_err(|e| format!("not a JSON object: {e}"))?;
    match found {
        Some(Ok(ts)) => Ok(ts),
        Some(Err(e)) => Err(e),
        None => Err(format!("no timestamp field `{field}`")),
    }
}

/// Walks one JSON object, validating all of it, and picks out one field as a
/// timestamp without building the object.
pub(super) struct FindTimestamp<'a>(&'a str);

/// A field's value seen as a timestamp.
pub(super) enum TsValue {
    Ok(i64),
    Bad(String),
}

impl<'de> Deserialize<'de> for TsValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TsValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a timestamp")
            }
            fn visit_i64<E>(self, v: i64) -> Result<TsValue, E> {
                Ok(TsValue::Ok(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<TsValue, E> {
                Ok(i64::try_from(v).map_or_else(
                    |_| TsValue::Bad(format!("timestamp {v} is too large")),
                    TsValue::Ok,
                ))
            }
            fn visit_f64<E>(self, v: f64) -> Result<TsValue, E> {
                Ok(TsValue::Bad(format!(
                    "timestamp {v} is not a whole number of milliseconds"
                )))
            }
            fn visit_str<E>(self, v: &str) -> Result<TsValue, E> {
                Ok(v.parse::<i64>().map_or_else(
                    |_| {
                        TsValue::Bad(format!(
                            "timestamp `{v}` is not milliseconds since the epoch"
                        ))
                    },
                    TsValue::Ok,
                ))
            }
            fn visit_unit<E>(self) -> Result<TsValue, E> {
                Ok(TsValue::Bad("timestamp is null".into()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<TsValue, E> {
                Ok(TsValue::Bad("timestamp is a boolean".into()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<TsValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TsValue::Bad("timestamp is an array".into()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TsValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(TsValue::Bad("timestamp is an object".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> DeserializeSeed<'de> for FindTimestamp<'_> {
    type Value = Option<Result<i64, String>>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V<'a>(&'a str);
        impl<'de> Visitor<'de> for V<'_> {
            type Value = Option<Result<i64, String>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut found = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == self.0 && found.is_none() {
                        found = Some(match map.next_value::<TsValue>()? {
                            TsValue::Ok(v) => Ok(v),
                            TsValue::Bad(e) => Err(format!("field `{}`: {e}", self.0)),
                        });
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(found)
            }
        }
        d.deserialize_map(V(self.0))
    }
}
