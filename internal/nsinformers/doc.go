// Package nsinformers lets one shared informer watch a list of namespaces,
// for a controller installed with Roles in those namespaces only (no
// cluster-wide list or watch is allowed to it).
//
// ListerWatcher merges one ListerWatcher per namespace into one. Its List
// is a consistent snapshot: the first namespace is listed as asked, the
// others at exactly the resourceVersion that list returned
// (resourceVersionMatch=Exact), so the merged list has one resourceVersion
// that is true of every namespace. Its Watch runs one watch per namespace
// and forwards their events on one channel, remembering the last
// resourceVersion delivered from each namespace; when the reflector starts
// watching again from the last resourceVersion it was given, each
// namespace resumes from its own, so no event is lost or replayed. Asked
// for any other resourceVersion it answers 410 Expired, and the reflector
// lists again. It does not support the streaming list (WatchList), which
// the reflector then does not use.
//
// Register puts such informers into the shared informer factories, where
// the factories' typed accessors (Lister, Informer) then find them.
package nsinformers
