package store

import bolt "go.etcd.io/bbolt"

type bboltTx = bolt.Tx
