// hf_cache_scan.mjs PKG HUB [EXTRA]: what @huggingface/hub (PKG, its node
// build) makes of the cache folder HUB. Prints as JSON scanCacheDir's repos
// (id, revisions with their refs and files: name, size, the blob a file
// resolves to) and warnings, and for each file of each revision the path
// downloadFileToCacheDir resolves it to from the cache alone: the fetch it
// is given fails, so a lookup that would go to the network is an error.
// EXTRA, a JSON list of {repo, revision, path}, names more files to resolve
// so (files in snapshot subfolders, which scanCacheDir does not list).
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkg, hub, extra = "[]"] = process.argv.slice(2);
const hf = await import(pathToFileURL(path.join(pkg, "dist", "index.mjs")).href);

const offline = async (url) => {
	throw new Error(`offline: the library asked the network for ${url}`);
};

const resolve = (name, path, revision) =>
	hf.downloadFileToCacheDir({repo: {type: "model", name}, path, revision, cacheDir: hub, fetch: offline});

const info = await hf.scanCacheDir(hub);
const repos = [];
for (const r of info.repos) {
	const revisions = [];
	for (const rev of r.revisions) {
		const files = [];
		for (const f of rev.files) {
			const name = path.relative(rev.path, f.path);
			const resolved = await resolve(r.id.name, name, rev.commitOid);
			files.push({name, size: f.blob.size, blob: f.blob.path, resolved});
		}
		revisions.push({commit: rev.commitOid, refs: rev.refs, size: rev.size, files});
	}
	repos.push({type: r.id.type, name: r.id.name, size: r.size, files: r.filesCount, revisions});
}
const extras = [];
for (const e of JSON.parse(extra)) {
	extras.push({...e, resolved: await resolve(e.repo, e.path, e.revision)});
}
console.log(JSON.stringify({repos, extras, warnings: info.warnings.map(String)}));
