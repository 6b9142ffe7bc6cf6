--[[
job_submit/lua for colo under Slurm 22.05: plans the GPU memory of every GPU job as a per-node
consumable GRES `gpumem` (MiB), so that slurmctld never sends a node more planned GPU memory than
its GPUs have. Install it as job_submit.lua next to slurm.conf, with JobSubmitPlugins=lua, and
give every node `Gres=gpu:N,gpumem:<N x GPU memory in MiB>` (GresTypes=gpu,gpumem; gres.conf:
`Name=gpumem Count=<MiB>`).

  * A colo job (colo's SPANK plugin set COLO_MEM, COLO_GPUS or COLO_SHARE in the job-control
    environment): gpumem = COLO_MEM (bytes per GPU) x COLO_GPUS (default 1), rounded up to MiB.
    Without COLO_MEM, or with COLO_SHARE=exclusive, each of its GPUs plans a whole GPU
    (GPU_MEM_MIB). Any gpumem the user asked for is replaced; the job's
    other GRES stay as they are.
  * A job that asks for whole GPUs (--gres=gpu:N, --gpus-per-node=N) without colo options:
    gpumem = N x GPU_MEM_MIB (replacing any gpumem it asked for).
  * Any other job is left exactly as it is.
  * Refused, with a message to the user: a COLO_MEM or COLO_GPUS that is not a positive decimal
    integer, more GPUs than a node has, a gpumem larger than any node's, and (REFUSE_JOB_WIDE_GPUS)
    GPUs asked for per job, task or socket (--gpus, --gpus-per-task, --gpus-per-socket), whose
    share of each node Slurm decides only at allocation.

Users may not change a job's GPU request afterwards in ways that bypass this (slurm_job_modify);
root (colo's plugin) may.
]]

-- Settings of this site ---------------------------------------------------------------------

-- The memory of one GPU, in MiB (80 GiB). A whole-GPU job plans this much per GPU.
GPU_MEM_MIB = 81920
-- The most gpumem (MiB) any node has: the largest `gpumem` count of the node lines.
MAX_NODE_GPUMEM_MIB = 163840
-- The most GPUs any node has.
MAX_GPUS_PER_NODE = 2
-- Refuse GPUs asked for per job, task or socket (their count per node is unknown here).
REFUSE_JOB_WIDE_GPUS = true

-- ------------------------------------------------------------------------------------------

local MIB = 1048576
local GPU = "gpu"
local GPUMEM = "gpumem"

-- The value of NAME in the job-control environment of a job request or record (spank_job_env:
-- "NAME=value" strings, indexed from 0 in 22.05, so it is walked with pairs, not ipairs), or nil.
local function spank_env(job, name)
  local env = job.spank_job_env
  if type(env) ~= "table" then
    return nil
  end
  local prefix = name .. "="
  for _, entry in pairs(env) do
    if type(entry) == "string" and entry:sub(1, #prefix) == prefix then
      return entry:sub(#prefix + 1)
    end
  end
  return nil
end

-- Whether colo's plugin marked the job (a request or a record) as a colo job.
local function is_colo_job(job)
  for _, name in ipairs({ "COLO_MEM", "COLO_GPUS", "COLO_SHARE" }) do
    if spank_env(job, name) ~= nil then
      return true
    end
  end
  return false
end

-- A positive decimal integer, or nil. One of more than 15 digits (beyond what Lua's numbers hold
-- exactly) is math.huge: more than any node has.
local function positive_integer(text)
  if text == nil or not text:match("^%d+$") then
    return nil
  end
  local digits = text:gsub("^0+", "")
  if #digits > 15 then
    return math.huge
  end
  local n = tonumber(text)
  if n == nil or n <= 0 then
    return nil
  end
  return n
end

-- The entries of a TRES-per-X string ("gres:gpu:2,gres:gpumem:5"): each {text=, name=, count=}.
-- name is the GRES name (without "gres:" or "gres/"); count is nil when the entry has none.
local function parse_tres(tres)
  local entries = {}
  if tres == nil or tres == "" then
    return entries
  end
  for text in string.gmatch(tres, "[^,]+") do
    local body = text:gsub("^gres[:/]", "")
    local fields = {}
    for f in string.gmatch(body, "[^:]+") do
      fields[#fields + 1] = f
    end
    local entry = { text = text, name = fields[1] or "" }
    if #fields >= 2 then
      local number, suffix = fields[#fields]:match("^(%d+)([kKmMgGtT]?)$")
      if number then
        local scale = { [""] = 1, k = 1024, m = 1024 ^ 2, g = 1024 ^ 3, t = 1024 ^ 4 }
        entry.count = tonumber(number) * scale[suffix:lower()]
      end
    end
    if #fields == 1 then
      entry.count = 1
    end
    entries[#entries + 1] = entry
  end
  return entries
end

-- The GPUs an entry list asks for (0 without any).
local function gpu_count(entries)
  local n = 0
  for _, e in ipairs(entries) do
    if e.name == GPU then
      n = n + (e.count or 1)
    end
  end
  return n
end

-- The entries again as a string, without any gpumem, plus gpumem:MIB when mib is given.
local function with_gpumem(entries, mib)
  local out = {}
  for _, e in ipairs(entries) do
    if e.name ~= GPUMEM then
      out[#out + 1] = e.text
    end
  end
  if mib then
    out[#out + 1] = string.format("gres:%s:%d", GPUMEM, mib)
  end
  return table.concat(out, ",")
end

-- Refuses: the message reaches the user (sbatch/srun print it).
local function refuse(message)
  slurm.log_user("colo: %s", message)
  return slurm.ERROR
end

-- The GPU request of another scope (per job, task or socket), or nil.
local function job_wide_gpus(job_desc)
  for _, field in ipairs({ "tres_per_job", "tres_per_task", "tres_per_socket" }) do
    if gpu_count(parse_tres(job_desc[field])) > 0 then
      return field
    end
  end
  return nil
end

-- The gpumem (MiB) a request plans, or nil and a reason to refuse it.
local function planned_gpumem(job_desc, entries)
  local mem_text = spank_env(job_desc, "COLO_MEM")
  local gpus_text = spank_env(job_desc, "COLO_GPUS")
  local colo = is_colo_job(job_desc)

  local wide = job_wide_gpus(job_desc)
  if wide and REFUSE_JOB_WIDE_GPUS then
    return nil, string.format(
      "GPUs asked for in %s cannot be planned per node; use --gres=gpu:N or --gpus-per-node=N", wide)
  end

  if colo then
    local gpus = 1
    if gpus_text ~= nil then
      gpus = positive_integer(gpus_text)
      if gpus == nil then
        return nil, string.format("COLO_GPUS must be a positive whole number, not '%s'", gpus_text)
      end
    end
    if gpus > MAX_GPUS_PER_NODE then
      return nil, string.format("%s GPUs asked for, but a node has at most %d", gpus_text,
        MAX_GPUS_PER_NODE)
    end
    local per_gpu_mib = GPU_MEM_MIB
    -- An exclusive job keeps its GPUs to itself: it plans them whole, whatever it needs.
    if spank_env(job_desc, "COLO_SHARE") == "exclusive" then
      return gpus * per_gpu_mib
    end
    if mem_text ~= nil then
      local bytes = positive_integer(mem_text)
      if bytes == nil then
        return nil, string.format(
          "COLO_MEM must be a positive whole number of bytes per GPU, not '%s'", mem_text)
      end
      if math.ceil(bytes / MIB) > MAX_NODE_GPUMEM_MIB then
        return nil, string.format(
          "COLO_MEM of %s bytes per GPU is more than any node has (%d MiB)", mem_text,
          MAX_NODE_GPUMEM_MIB)
      end
      local mib = math.ceil(bytes * gpus / MIB)
      if mib > MAX_NODE_GPUMEM_MIB then
        return nil, string.format(
          "%d GPUs x %s bytes is %d MiB of GPU memory, more than any node has (%d MiB)", gpus,
          mem_text, mib, MAX_NODE_GPUMEM_MIB)
      end
      return mib
    end
    return gpus * per_gpu_mib
  end

  local gpus = gpu_count(entries)
  if gpus > 0 then
    local mib = gpus * GPU_MEM_MIB
    if mib > MAX_NODE_GPUMEM_MIB then
      return nil, string.format("%d whole GPUs need %d MiB of GPU memory, more than any node has "
        .. "(%d MiB)", gpus, mib, MAX_NODE_GPUMEM_MIB)
    end
    return mib
  end
  return nil -- neither colo options nor GPUs: nothing to plan
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local before = job_desc.tres_per_node
  local entries = parse_tres(before)
  local mib, problem = planned_gpumem(job_desc, entries)
  if problem then
    return refuse(problem)
  end
  if mib == nil then
    return slurm.SUCCESS -- left exactly as it is
  end
  local after = with_gpumem(entries, mib)
  if after ~= before then
    job_desc.tres_per_node = after
    slurm.log_info("colo: job of uid %d: tres_per_node %s -> %s", submit_uid, tostring(before),
      after)
  end
  return slurm.SUCCESS
end

-- Root (colo's plugin, an administrator) may change anything. A user changing the GPU request
-- of a pending job: a colo job's may not change (its gpumem is colo's); a whole-GPU job's gpumem
-- follows its new GPU count; a request without GPUs passes as it is. (Slurm 22.05 drops
-- messages to the user from job_modify: the user sees "Unspecified error".)
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if modify_uid == 0 or job_desc.tres_per_node == nil then
    return slurm.SUCCESS
  end
  if is_colo_job(job_rec) then
    slurm.log_info("colo: uid %d may not change the GPU request of colo job %d", modify_uid,
      job_rec.job_id)
    return slurm.ERROR
  end
  local before = job_desc.tres_per_node
  local entries = parse_tres(before)
  local gpus = gpu_count(entries)
  if gpus == 0 then
    return slurm.SUCCESS
  end
  local mib = gpus * GPU_MEM_MIB
  if mib > MAX_NODE_GPUMEM_MIB then
    slurm.log_info("colo: uid %d asked job %d for %d whole GPUs, more than any node has",
      modify_uid, job_rec.job_id, gpus)
    return slurm.ERROR
  end
  local after = with_gpumem(entries, mib)
  if after ~= before then
    job_desc.tres_per_node = after
  end
  return slurm.SUCCESS
end

slurm.log_info("colo: job_submit.lua loaded (GPU_MEM_MIB=%d, MAX_NODE_GPUMEM_MIB=%d)", GPU_MEM_MIB,
  MAX_NODE_GPUMEM_MIB)
return slurm.SUCCESS
