// hf_cache_scan.mjs PKG HUB: what @huggingface/hub (PKG, its node build)
// makes of the cache folder HUB. Prints as JSON scanCacheDir's repos
// (id, revisions with their refs and files: name, size, the blob a file
// resolves to) and warnings, and for each file of each revision the path
// downloadFileToCacheDir resolves it to from the cache alone: the fetch it
// is given fails, so a lookup that would go to the network is an error.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkg, hub] = process.argv.slice(2);
const hf = await import(pathToFileURL(path.join(pkg, "dist", "index.mjs")).href);

const offline = async (url) => {
	throw new Error(`offline: the library asked the network for ${url}`);
};

const info = await hf.scanCacheDir(hub);
const repos = [];
for (const r of info.repos) {
	const revisions = [];
	for (const rev of r.revisions) {
		const files = [];
		for (const f of rev.files) {
			const name = path.relative(rev.path, f.path);
			const resolved = await hf.downloadFileToCacheDir({
				repo: {type: r.id.type, name: r.id.name},
				path: name,
				revision: rev.commitOid,
				cacheDir: hub,
				fetch: offline,
			});
			files.push({name, size: f.blob.size, blob: f.blob.path, resolved});
		}
		revisions.push({commit: rev.commitOid, refs: rev.refs, size: rev.size, files});
	}
	repos.push({type: r.id.type, name: r.id.name, size: r.size, files: r.filesCount, revisions});
}
console.log(JSON.stringify({repos, warnings: info.warnings.map(String)}));
