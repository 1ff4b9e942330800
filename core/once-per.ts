// One value per key object, made on first use and kept as long as the key
// lives: what a snapshot, a replica spec or a plugin instance derives once
// instead of on every request.

export function oncePer<K extends object, V>(make: (key: K) => V): (key: K) => V {
  const values = new WeakMap<K, V>();
  return (key) => {
    let value = values.get(key);
    if (value === undefined) values.set(key, (value = make(key)));
    return value;
  };
}
