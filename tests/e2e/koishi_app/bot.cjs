// A Koishi bot with koishi-plugin-adapter-onebot dialling the daemon's forward WebSocket.
// tests/e2e/test_koishi.py starts it (cwd: the npm install dir, NODE_PATH its
// node_modules) and reads the JSON lines it appends to KOISHI_RECORD_FILE:
//   {"ready": ...}                the adapter is connected and knows its bot
//   {"event": ...}                a message session as Koishi built it, with the quoted
//                                 message the adapter fetched (get_msg) for its reply segment
//                                 and its elements (type and attributes: an at's id)
//   {"quoted": ...}               bot.getMessage (get_msg) of that message: what Koishi's
//                                 adapter does for a quoted message
//   {"sent": [...]} / {"mine": ...}  the ids of the answer (a quote of the message plus
//                                 text) and getMessage of the first one
//   {"error": ...}                anything thrown on the way (the test fails on it)
// and on "ping" does all of that; Koishi's own log lines go to stdout.
const fs = require('fs')
const { App, h } = require('koishi')
const { OneBotBot } = require('koishi-plugin-adapter-onebot')
const { HTTP } = require('@koishijs/plugin-http')

const record = (entry) => fs.appendFileSync(process.env.KOISHI_RECORD_FILE,
                                            JSON.stringify(entry) + '\n')
const shown = (message) => message && {
  id: message.id, content: message.content, user: message.user && message.user.id,
  userName: message.user && message.user.name, timestamp: message.timestamp,
  guild: message.guild && message.guild.id, channel: message.channel && message.channel.id,
  elements: (message.elements || []).map((element) => element.type),
  quote: message.quote ? shown(message.quote) : null,
}

const app = new App()
app.plugin(HTTP)  // the service the adapter's WebSocket client is made by
app.plugin(OneBotBot, {
  protocol: 'ws',
  endpoint: process.env.KOISHI_ENDPOINT,
  selfId: process.env.KOISHI_SELF_ID,
  token: process.env.KOISHI_TOKEN,
  retryTimes: 2,
})
app.on('login-updated', ({ bot }) => {
  if (bot.status === 1) record({ ready: { selfId: bot.selfId, user: bot.user && bot.user.id } })
})
app.on('message', async (session) => {
  try {
    record({ event: { id: session.messageId, content: session.content, userId: session.userId,
                      channelId: session.channelId, guildId: session.guildId || null,
                      quote: session.quote ? shown(session.quote) : null,
                      elements: (session.elements || []).map((element) => ({
                        type: element.type, attrs: element.attrs })) } })
    if (!/\bping$/.test(session.content)) return
    const quoted = await session.bot.getMessage(session.channelId, session.messageId)
    record({ quoted: shown(quoted) })
    const sent = await session.send(h('quote', { id: session.messageId }) + 'pong')
    record({ sent })
    const mine = await session.bot.getMessage(session.channelId, sent[0])
    record({ mine: shown(mine) })
  } catch (error) {
    record({ error: String(error && error.stack || error) })
  }
})
// Members and roles (issue 33): the bot's name once logged in, and on "whoami" the author as
// the event names them, Koishi's admin check and getGuildMember (get_group_member_info):
//   {"login": {"name": ...}}      {"whoami": {...}}
app.on('login-updated', ({ bot }) => {
  if (bot.status === 1) record({ login: { name: bot.user && bot.user.name } })
})
app.on('message', async (session) => {
  if (!/\bwhoami$/.test(session.content)) return
  try {
    const member = session.event.member || {}
    const fetched = await session.bot.getGuildMember(session.guildId, session.userId)
    record({ whoami: {
      id: session.messageId, userId: session.userId, name: session.event.user.name,
      nick: member.nick, roles: (member.roles || []).map((role) => role.id),
      admin: await session.bot.checkPermission('onebot.group.admin', session),
      owner: await session.bot.checkPermission('onebot.group.owner', session),
      fetched: { user: fetched.user && fetched.user.id, name: fetched.user && fetched.user.name,
                 nick: fetched.nick, roles: (fetched.roles || []).map((role) => role.id) },
    } })
  } catch (error) {
    record({ error: String(error && error.stack || error) })
  }
})
// Issue 33 (tests/e2e/test_koishi_replies.py), each on a message that is just the command:
//   "card":   bot.internal.setGroupCard, known but impossible → {"card": {code, message}}
//   "quote gone": a reply quoting message 99999, which the daemon never held → {"gone": ids}
//   "recall twice": send, deleteMessage, deleteMessage again → {"recall_again": {code, ...}}
const failure = (error) => ({ code: error && error.code, message: String(error && error.message) })
app.on('message', async (session) => {
  try {
    const text = (session.content || '').replace(/<[^>]*>/g, '').trim()  // without the at
    if (text === 'card') {
      await session.bot.internal.setGroupCard(session.guildId, session.userId, 'x')
        .then(() => record({ card: null }), (error) => record({ card: failure(error) }))
    } else if (text === 'quote gone') {
      record({ gone: await session.send(h('quote', { id: '99999' }) + 'still here') })
    } else if (text === 'recall twice') {
      const [sent] = await session.send('to recall')
      await session.bot.deleteMessage(session.channelId, sent)
      await session.bot.deleteMessage(session.channelId, sent).then(
        () => record({ recall_again: null }), (error) => record({ recall_again: failure(error) }))
    }
  } catch (error) {
    record({ error: String(error && error.stack || error) })
  }
})
process.on('unhandledRejection', (error) => record({ error: String(error && error.stack || error) }))
app.start().catch((error) => { record({ error: String(error) }); process.exit(1) })
